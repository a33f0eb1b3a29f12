"""What the dumps say, as it leaves slurmdoc.traces (the fused diagnosis and JSON read it)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict


class TraceVerdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # missing: a member never entered a collective the others entered; mismatch: every member
    # entered it, one unlike the others; consistent: no hole; undecided: nothing to line up
    kind: Literal["missing", "mismatch", "consistent", "undecided"]
    culprits: list[int] = []
    # dump: the culprits' own dumps (or the others') show it; absent_dump: named only because
    # they left no dump (weaker)
    evidence: Literal["dump", "absent_dump"] = "dump"
    pg: str = "0"  # the group as the entries name it ('0': the default group)
    pg_desc: str = ""
    members: list[int] = []
    seq: Optional[int] = None  # collective_seq_id, as the dumps number it
    p2p: bool = False
    op: Optional[str] = None  # 'all_reduce' (backend prefix taken off)
    sizes: Optional[list] = None
    missing_ranks: list[int] = []
    mismatch: Optional[dict] = None  # {rank, field: op|sizes|dtypes, expected, got}
    waiting_ranks: list[int] = []
    culprit_last: Optional[dict] = None  # {rank, pg, seq, op, frames: ['file:line in f']}
    ranks_dumped: list[int] = []
    absent_dumps: list[int] = []
    files: int = 0
    warnings: list[str] = []
