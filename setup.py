"""Everything about the distribution is in pyproject.toml except one mapping that it cannot
express beside package discovery: the repository's templates/ go into the wheel as
patchctl/templates/, the default templates of `matrix render` (see patchctl.templates_dir)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["patchctl", "patchctl.*", "engine", "engine.*"]), "patchctl.templates"],
    package_dir={"patchctl.templates": "templates"},
)
