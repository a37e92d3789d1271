"""The OS sandbox every piece of LLM-written code runs in, and the processes it runs in.

`box` (the outer layer, bubblewrap; the levels and the record), `confine` (the inner layer, per
worker: namespaces, Landlock through `landlock`, capabilities), `nsutil`, `launch` (one-shot
confined runs and the probe), `scratch` (kiln's scratch root and control dir), `zygote` (the fork
server: its preloads and each worker's entry point come as data, so the sandbox imports nothing of
its users), `procs` and `isolation` (scrubbed environments, starting, polling and killing
workers). The check (`kiln.tools.check`), the Proposer's case checks, the profiler and the
curriculum all run their untrusted code through it.
"""
