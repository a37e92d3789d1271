"""kiln.graphs: the LangGraph state machine that runs the agents."""
