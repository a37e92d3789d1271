"""The environment record on a CPU machine, NVML reason decoding and the throttling flag."""

from kiln.tools import gpuenv
from kiln.tools.records import EnvRecord


def test_cpu_record_has_versions_and_none_nvml_fields():
    rec = gpuenv.env_record("cpu")
    assert rec.device == "cpu" and rec.torch and rec.python
    assert rec.gpu_name is None and rec.sm_clock_mhz_before is None and rec.throttled is False
    assert EnvRecord.model_validate_json(rec.model_dump_json()) == rec


def test_decode_reasons():
    assert gpuenv.decode_reasons(0) == []
    assert gpuenv.decode_reasons(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert gpuenv.decode_reasons(0x40) == ["hw_thermal_slowdown"]


def test_throttled_only_for_power_or_thermal_reasons():
    before = gpuenv.env_record("cpu")
    assert gpuenv.env_after(before, {"gpu_idle"}).throttled is False
    after = gpuenv.env_after(before, {"sw_power_cap"})
    assert after.throttled and after.throttle_reasons == ["sw_power_cap"]


def test_nvml_index_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert gpuenv.nvml_index(0) == 3 and gpuenv.nvml_index(1) == 5
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpuenv.nvml_index(2) == 2


def test_other_gpu_processes_count_beyond_the_checks_own_workers():
    assert gpuenv.others([]) is None
    assert gpuenv.others([(3, 3), (2, 2)]) == 0  # only the check's own workers
    assert gpuenv.others([(3, 3), (9, 2), (4, 1)]) == 7  # the most crowded sample counts
    assert gpuenv.others([(1, 3)]) == 0  # a worker of its own with no context: never negative


def test_other_gpu_processes_are_unknown_on_a_cpu_machine_and_rendered_as_a_warning():
    from kiln.tools import render
    from kiln.tools.records import TimingRecord

    if gpuenv._nvml() is None:
        assert gpuenv.gpu_processes(0) is None
    lines = render._timing(TimingRecord(measured=True, env=EnvRecord(other_gpu_processes=2)))
    assert "WARNING: 2 other process(es) held the GPU during measurement" in lines
    assert not any("other process" in x for x in render._timing(TimingRecord(measured=True, env=EnvRecord())))


def test_gpu_processes_leave_out_kilns_own_process(monkeypatch):
    """NVML is absent on the CPU machine: a stand-in binding lists the processes (the H200 run counted
    the test process itself, which held a context from earlier CUDA tests, as another process)."""
    import os
    from types import SimpleNamespace

    listed: list[int] = []
    nv = SimpleNamespace(nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetHandleByUUID=lambda u: 0,
                         nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=p) for p in listed])
    monkeypatch.setattr(gpuenv, "_nvml", lambda: nv)
    assert gpuenv.gpu_processes(0) is None  # NVML lists nobody: unknown, not zero
    listed[:] = [os.getpid()]
    assert gpuenv.gpu_processes(0) == 0
    listed[:] = [os.getpid(), 4242, 4243, 4243]
    assert gpuenv.gpu_processes(0) == 2
