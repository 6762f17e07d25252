"""Typed errors and the exit codes they map to.

Domain modules raise these; only `patchctl.cli` turns them into a message and an exit code.

    0  ok
    1  a check failed (lint findings, drift, a red canary, a failing gate)
    2  usage or configuration error (bad flag, invalid matrix.yaml, unknown series)
    3  environment error (network, git, Docker, compiler missing)
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    ENVIRONMENT = 3


class PatchctlError(Exception):
    """Base class: one clear line of message, and the exit code it stands for."""

    exit_code: ExitCode = ExitCode.USAGE


class UsageError(PatchctlError):
    exit_code = ExitCode.USAGE


class ConfigError(PatchctlError):
    """matrix.yaml (or another input file) is invalid; the message names file, key path and line."""

    exit_code = ExitCode.USAGE


class CheckFailed(PatchctlError):
    """A check ran and found problems (the findings are reported separately)."""

    exit_code = ExitCode.CHECK_FAILED


class EnvironmentFailure(PatchctlError):
    """Something outside patchctl failed: git, the network, Docker, a compiler."""

    exit_code = ExitCode.ENVIRONMENT


class GitError(EnvironmentFailure):
    pass
