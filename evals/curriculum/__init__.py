"""`kiln curriculum`: rounds of problems written at the Coder's frontier, checked groups of Coder
samples, CA-GRPO rewards, and a `datasets`-loadable export (docs/curriculum.md).

`config`, `frontier`, `rewards`, `store`, `groups`, `rounds`, `executors`, `runner`, `export`,
`card`, `report`, `cli`.
"""
