"""kiln.tools: compile, verify, time and profile candidate kernels. No LLM imports here."""
