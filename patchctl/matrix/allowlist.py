"""Known findings a project has decided to live with, silenced by rule and subject.

# matrix-allow.yaml
allow:
  - rule: MX101
    subject: -tinygrad          # exact, or a glob such as '-cpu-*'
    reason: one image serves every device; it has no toolchain in its name
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

from ..output.findings import Finding
from ..project import yamlloc
from ..records import dataclass
from .checks import RULES


@dataclass(frozen=True)
class AllowEntry:
    rule: str
    subject: str
    reason: str
    file: str
    line: int

    def matches(self, finding: Finding) -> bool:
        return finding.rule == self.rule and fnmatchcase(finding.subject, self.subject)

    def note(self) -> str:
        """The line `matrix check` prints for an entry that matched nothing."""
        return f"{self.file}:{self.line}: note: allowlist entry {self.rule} {self.subject!r} matched nothing; delete it"


@dataclass(frozen=True)
class Filtered:
    kept: list[Finding]
    silenced: list[tuple[Finding, AllowEntry]]
    unused: list[AllowEntry]  # entries that matched nothing: candidates for deletion


def load(path: Path, display: str) -> list[AllowEntry]:
    doc = yamlloc.load(path)
    data = doc.data
    if not isinstance(data, dict) or set(data) - {"allow"}:
        raise doc.error((), "an allowlist is a mapping with one key, 'allow': a list of {rule, subject, reason}")
    items = data.get("allow") or []
    if not isinstance(items, list):
        raise doc.error(("allow",), "must be a list of {rule, subject, reason}")
    entries = []
    for i, item in enumerate(items):
        where = ("allow", i)
        if not isinstance(item, dict) or set(item) - {"rule", "subject", "reason"}:
            raise doc.error(where, "each entry is a mapping with rule, subject and reason")
        for key in ("rule", "subject", "reason"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise doc.error(where + (key,), f"{key} must be a non-empty string")
        if item["rule"] not in RULES:
            raise doc.error(where + ("rule",), f"unknown rule {item['rule']!r} (rules: {', '.join(RULES)})")
        entries.append(AllowEntry(item["rule"], item["subject"], item["reason"].strip(), display, doc.line_of(where)))
    return entries


def apply(findings: list[Finding], entries: list[AllowEntry]) -> Filtered:
    kept, silenced, used = [], [], set()
    for finding in findings:
        entry = next((e for e in entries if e.matches(finding)), None)
        if entry is None:
            kept.append(finding)
        else:
            silenced.append((finding, entry))
            used.add(entry)
    return Filtered(kept, silenced, [e for e in entries if e not in used])
