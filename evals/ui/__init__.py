"""`kiln ui`: a local web dashboard over run directories (single runs and batches), live while they
run. It only reads what kiln recorded on disk (events, candidates, check records, prompts, the batch
store), never writes into a run, and serves nothing outside the folders it was given.

- `roots`: the served folders and the one path resolver every request goes through;
- `discover`: which folders are runs and which are batches;
- `runview`, `nodeview`, `batchview`: a run, one candidate, a batch, as JSON-ready dicts;
- `live`: server-sent events that tail `events.jsonl` and the batch store;
- `control`: starting and stopping runs, only with `--allow-control`;
- `server`: the Starlette app (pages, API, auth); `cli`: the `kiln ui` command.
"""
