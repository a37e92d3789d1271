"""LLM plumbing for the agent roles: backend specs, chat-model construction, transport (timeouts,
retries, rate limit), usage and prices, budgets, an SQLite response cache, secret redaction and a
scripted chat model. Nothing here touches the network or the disk at import time."""
