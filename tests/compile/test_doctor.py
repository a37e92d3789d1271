"""`kiln doctor` through the real console script."""

import json
import subprocess
import sys


def test_doctor_json_reports_every_item(tmp_path):
    cache = tmp_path / "cache"
    (cache / "ext").mkdir(parents=True)
    (cache / "ext" / "blob.so").write_bytes(b"\0" * (3 * 2**20))
    p = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "doctor", "--json", "--cache-dir", str(cache)], capture_output=True, text=True,
                       timeout=180)
    items = {it["name"]: it for it in json.loads(p.stdout)}
    assert set(items) == {"torch / Triton", "GPU / driver", "CUDA / nvcc", "fast CUDA path", "ninja (load_inline)",
                          "Nsight Compute", "Triton interpreter", "compile cache", "sandbox", "fork server"}
    assert all(it["status"] in ("OK", "WARN", "FAIL") for it in items.values())
    assert all(it["fix"] for it in items.values() if it["status"] != "OK")
    assert items["Triton interpreter"]["status"] == "OK"
    assert items["fork server"]["detail"] == "one per kiln process (KILN_FORK_SERVER=process)"  # the suite's setting
    import torch

    if torch.version.cuda is None:  # CI's CPU build: said in words, never "built for CUDA None" or "CUDA -"
        assert items["CUDA / nvcc"]["detail"].startswith("torch is a CPU build (no CUDA);")
    assert items["compile cache"]["detail"] == f"{cache} (3.0 MiB)"
    assert p.returncode == (1 if any(it["status"] == "FAIL" for it in items.values()) else 0)


def test_table_render_shows_status_and_fix(capsys):
    from kiln.tools.cli_doctor import DoctorItem, render

    render([DoctorItem(name="GPU / driver", status="WARN", detail="no CUDA GPU", fix="use a GPU machine"),
            DoctorItem(name="compile cache", status="OK", detail="/tmp/x (0.0 MiB)")])
    out = capsys.readouterr().out
    assert "kiln doctor" in out and "WARN" in out and "use a GPU machine" in out and "compile cache" in out


def test_cache_item_counts_bytes(tmp_path):
    from kiln.tools.cli_doctor import check_cache

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.cubin").write_bytes(b"1" * 2**20)
    item = check_cache(tmp_path)
    assert item.status == "OK" and item.detail == f"{tmp_path} (1.0 MiB)"
    assert check_cache(tmp_path / "missing").detail.endswith("(0.0 MiB)")
