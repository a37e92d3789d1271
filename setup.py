"""Map the top-level code folders into the `kiln` package (kiln.tools, kiln.agents, ..., and
kiln.rewards, the reward callable for RL trainers); `kiln/` itself holds only the package's
front door (`kiln.load` for model bundles).

Nothing installs a generic top-level `tools`, `agents`, `graphs` or `evals`, which other
distributions use.
"""

from setuptools import find_packages, setup

LAYERS = ("tools", "agents", "graphs", "evals", "rewards")

packages: list[str] = ["kiln"]
package_dir: dict[str, str] = {"kiln": "kiln"}
for layer in LAYERS:
    package_dir[f"kiln.{layer}"] = layer
    packages.append(f"kiln.{layer}")
    packages += [f"kiln.{layer}.{sub}" for sub in find_packages(layer)]

setup(packages=packages, package_dir=package_dir)
