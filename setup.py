"""Package layout: the top-level folders are the subpackages of `patchgym`.

PyPI already has unrelated packages called `env`, `tasks`, `harness`, `rl` and `scrubber`, so the
folders are mapped onto `patchgym.<folder>` with setuptools' `package_dir` instead of being
installed as top-level names. `cli/` holds the root package (`patchgym` itself: the version and the
console script). Every directory under a layer is listed as a (namespace) package, data directories
included, so that their files travel with the code and setuptools has nothing to warn about.
Everything else (metadata, dependencies, extras) is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

LAYERS = ["env", "tasks", "scrubber", "harness", "rl", "tests"]

package_dir = {"patchgym": "cli"}
packages = ["patchgym"]
for layer in LAYERS:
    package_dir[f"patchgym.{layer}"] = layer
    packages.append(f"patchgym.{layer}")
    # Namespace discovery, not find_packages: the data directories (the bundled suite's libraries,
    # fleet and preset files) hold .py files, so setuptools saw "importable packages" missing from
    # `packages` and printed a "Package would be ignored" warning for each (~670 lines of `make demo`).
    packages += [f"patchgym.{layer}.{sub}" for sub in find_namespace_packages(layer, exclude=["*__pycache__*", "__pycache__"])]

setup(
    package_dir=package_dir,
    packages=packages,
    # Bundled task sources, presets and other data files travel with the code.
    package_data={name: ["**/*"] for name in packages},
    include_package_data=True,
)
