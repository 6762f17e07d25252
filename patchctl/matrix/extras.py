"""`workflows: extras:` which of patchctl's extras the rendered workflows install with it.

torch and triton (the `engine` extra) are a 510 MB download and 2 GB installed; a downstream
whose gates never run patchctl's engine should not pay for them. Unset, the list follows the
series: `engine` when a gate or a build step runs the engine (`"$PATCHCTL_PYTHON" -m engine`),
else nothing. A list written by hand that leaves `engine` out while a gate runs it is MX805.
"""

from __future__ import annotations

import re

from ..output.findings import Finding
from ..project.config import Config
from ..records import dataclass
from .model import BuildMatrix

ENGINE = "engine"
# patchctl's engine started from a shell command: `python -m engine ...`, `-m engine.tools.x`,
# or imported by `python -c "import engine..."` / `from engine... import`.
RUNS_ENGINE = re.compile(r"""(?:^|[\s'"(;&|])-m\s*['"]?engine(?![\w-])|\b(?:import|from)\s+engine(?![\w-])""")


@dataclass(frozen=True)
class EngineUser:
    """A gate or build step that runs patchctl's engine."""

    series: str
    kind: str  # "gate" or "build step"
    name: str


def engine_users(config: Config | None) -> list[EngineUser]:
    found = []
    for series in config.series.values() if config else ():
        for kind, steps in (("gate", series.gates), ("build step", series.build)):
            for step in steps:
                if RUNS_ENGINE.search(step.command):
                    found.append(EngineUser(series.name, kind, step.name))
    return found


def resolved_extras(config: Config | None, matrix: BuildMatrix) -> tuple[str, ...]:
    """The extras the workflows install: matrix.yaml's list, else `engine` only where something runs it."""
    if matrix.workflows.extras is not None:
        return matrix.workflows.extras
    return (ENGINE,) if engine_users(config) else ()


def extras_cover_the_engine(matrix: BuildMatrix, config: Config | None) -> list[Finding]:
    """MX805: an `extras:` list written without `engine` while a gate or build step runs the engine."""
    extras = matrix.workflows.extras
    users = engine_users(config)
    if extras is None or ENGINE in extras or not users:
        return []
    first = users[0]
    more = f" (and {len(users) - 1} more)" if len(users) > 1 else ""
    return [
        Finding(
            matrix.matrix_file,
            matrix.workflows.extras_line,
            "MX805",
            f"workflows: extras: [{', '.join(extras)}] leaves out engine, but {first.kind} {first.name} of series "
            f"{first.series} runs patchctl's engine{more}: add engine, or remove the key (its default follows "
            "the gates)",
            f"{first.series}/{first.name}",
        )
    ]
