"""`kiln doctor` through the real console script."""

import json
import subprocess


def test_doctor_json_reports_every_item(tmp_path):
    cache = tmp_path / "cache"
    (cache / "ext").mkdir(parents=True)
    (cache / "ext" / "blob.so").write_bytes(b"\0" * (3 * 2**20))
    p = subprocess.run(["kiln", "doctor", "--json", "--cache-dir", str(cache)], capture_output=True, text=True,
                       timeout=180)
    items = {it["name"]: it for it in json.loads(p.stdout)}
    assert set(items) == {"torch / Triton", "GPU / driver", "CUDA / nvcc", "fast CUDA path", "ninja (load_inline)",
                          "Nsight Compute", "Triton interpreter", "compile cache"}
    assert all(it["status"] in ("OK", "WARN", "FAIL") for it in items.values())
    assert all(it["fix"] for it in items.values() if it["status"] != "OK")
    assert items["Triton interpreter"]["status"] == "OK"
    assert items["compile cache"]["detail"] == f"{cache} (3.0 MiB)"
    assert p.returncode == (1 if any(it["status"] == "FAIL" for it in items.values()) else 0)


def test_doctor_table_and_unwritable_cache_fails(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    p = subprocess.run(["kiln", "doctor", "--cache-dir", str(ro / "sub")], capture_output=True, text=True,
                       timeout=180)
    ro.chmod(0o700)
    assert "kiln doctor" in p.stdout and "compile cache" in p.stdout
    import os

    if os.geteuid() != 0:  # root can write anywhere: the FAIL path is only reachable as a user
        assert "FAIL" in p.stdout and p.returncode == 1
