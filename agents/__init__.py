"""kiln.agents: the LLM roles (Coder, Judge, Proposer), their backends and built-in offline policies."""
