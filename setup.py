"""Package layout: the top-level folders are the subpackages of `patchgym`.

PyPI already has unrelated packages called `env`, `tasks`, `harness`, `rl` and `scrubber`, so the
folders are mapped onto `patchgym.<folder>` with setuptools' `package_dir` instead of being
installed as top-level names. `cli/` holds the root package (`patchgym` itself: the version and the
console script). Everything else (metadata, dependencies, extras) is in pyproject.toml.
"""

from setuptools import find_packages, setup

LAYERS = ["env", "tasks", "scrubber", "harness", "rl", "tests"]

package_dir = {"patchgym": "cli"}
packages = ["patchgym"]
for layer in LAYERS:
    package_dir[f"patchgym.{layer}"] = layer
    packages.append(f"patchgym.{layer}")
    packages += [f"patchgym.{layer}.{sub}" for sub in find_packages(layer)]

setup(
    package_dir=package_dir,
    packages=packages,
    # Bundled task sources, presets and other data files travel with the code.
    package_data={name: ["**/*"] for name in packages},
    include_package_data=True,
)
