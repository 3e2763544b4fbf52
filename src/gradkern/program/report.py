"""What a program's tape holds, launch by launch (docs/programs.md): `gk.inspect`
of a program or of its tape. Counts come from the recorded steps; nothing is
run or compiled to make the report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchRow:
    number: int
    kernel: str
    saved_bytes: int  # old contents this launch overwrote while an earlier launch's reverse still read them
    kernel_tape_bytes: int  # the launch's own kernel tape (split mode)


@dataclass(frozen=True)
class ProgramInspection:
    """Per recorded launch, what its reverse keeps; and the totals, with the
    zero shadows the program made for arrays nothing annotated."""

    launches: tuple[LaunchRow, ...]
    internal_shadow_bytes: int

    @property
    def saved_bytes(self) -> int:
        return sum(r.saved_bytes for r in self.launches)

    @property
    def kernel_tape_bytes(self) -> int:
        return sum(r.kernel_tape_bytes for r in self.launches)

    @property
    def bytes(self) -> int:
        return self.saved_bytes + self.kernel_tape_bytes + self.internal_shadow_bytes

    def __str__(self) -> str:
        lines = [f"{'launch':>6}  {'kernel':<24} {'saved bytes':>14} {'kernel tape bytes':>18}"]
        lines += [f"{r.number:>6}  {r.kernel:<24} {r.saved_bytes:>14,} {r.kernel_tape_bytes:>18,}"
                  for r in self.launches]
        lines.append(f"{'total':>6}  {len(self.launches):<24} {self.saved_bytes:>14,} "
                     f"{self.kernel_tape_bytes:>18,}")
        lines.append(f"internal shadows: {self.internal_shadow_bytes:,} bytes; everything: {self.bytes:,} bytes")
        return "\n".join(lines)
