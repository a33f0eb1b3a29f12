"""Stage 2 of the diagnosis: rank resolution. The job's layout (which sources carry srun
labels of torchrun agents, how many ranks a node runs, which file names lie), worked out
once the input has been read, turns every RankRef (a prefix, a file name, a launcher's
local rank) into a global rank, and places ranks on hosts.
"""

from __future__ import annotations

from typing import Optional

from slurmdoc.diagnosis.findings import Collector
from slurmdoc.models import RankRef


class Layout:
    def __init__(self, c: Collector) -> None:
        self.c = c
        self.nested_sources: set[int] = set()
        self.node_order: dict[int, int] = {}
        self.ranks_per_node: Optional[int] = None
        self.bad_hints: set[int] = set()
        self.multi_node = False
        self.total = 0  # ranks the job is known to have, once the root stage has counted them
        self.node_host: dict[tuple[int, int], str] = {}  # (source, srun label of an agent) -> host
        self._layout()

    def _layout(self) -> None:
        refs = list(self.c.seen.values())
        # srun labels are node indexes when srun started one torchrun per node: the inner
        # prefix then names another rank than the label, or a local rank. (srun-native jobs
        # print `3: [rank3]:`, label and rank agreeing.)
        self.nested_sources = {
            r.source for r in refs if r.label is not None and (r.local is not None or (r.rank is not None and r.rank != r.label))
        } | self.c.agent_sources
        # per-node files named after hosts (slurm-node017.out): number the nodes 0, 1, ...
        self.node_order = {n: i for i, n in enumerate(sorted({r.node_index for r in refs if r.node_index is not None}))}
        # ranks per node: stated by a launcher summary, else inferred from the local ranks
        # seen, but only when every node shows the same complete set (a --local-ranks-filter
        # run shows a few local ranks and would give wrong global ranks)
        per_node: dict[tuple[int, int], set[int]] = {}
        for r in refs + self.c.named_locals:
            node = self._node_of(r)
            if r.local is not None and node is not None:
                per_node.setdefault((r.source, node), set()).add(r.local)
        sets = list(per_node.values())
        full = bool(sets) and all(s == set(range(len(s))) for s in sets) and len({len(s) for s in sets}) == 1
        locals_ = [r.local for r in refs if r.local is not None]
        self.ranks_per_node = (max(locals_) + 1) if locals_ and (full or not sets) else None
        for (_, node, loc), rank in self.c.placements.items():
            if node > 0 and (rank - loc) % node == 0 and (rank - loc) // node > loc:
                self.ranks_per_node = (rank - loc) // node  # stated by the launcher: trust it
                break
        # a file named after one rank whose lines carry other ranks' prefixes is not per-rank
        hinted = {r.source: r.rank if r.rank is not None else r.local for r in refs if r.hinted}
        self.bad_hints = {
            r.source for r in refs if not r.hinted and r.source in hinted and (r.rank is not None or r.local is not None)
            and (r.rank if r.rank is not None else r.local) != hinted[r.source]
        }
        node_ids = {r.label for r in refs if r.label is not None and r.source in self.nested_sources}
        node_ids |= {r.node_index for r in refs if r.node_index is not None}
        # (or ranks' lines tagged with two hosts: a local rank whose node has no index is then
        # no global rank, as `worker-1: ... --local_rank=1 ... exits` is not rank 1 of 16)
        # (or a summary's global rank other than the local rank: `rank : 5 (local_rank: 1)`)
        self.multi_node = len(node_ids) > 1 or len(self.c.line_hosts) > 1 or self.c.rank_past_local

    def _node_of(self, r: RankRef) -> Optional[int]:
        if r.label is not None:
            return r.label
        if r.node_index is not None:
            return self.node_order.get(r.node_index, r.node_index)
        return None

    def resolve(self, r: RankRef) -> Optional[int]:
        if r.hinted and r.source in self.bad_hints:
            return None
        if r.rank is not None:
            return r.rank
        if r.local is not None:
            raw_node = r.label if r.label is not None else r.node_index
            if raw_node is not None and (r.source, raw_node, r.local) in self.c.placements:
                return self.c.placements[(r.source, raw_node, r.local)]
            node = self._node_of(r)
            if node == 0:
                return r.local
            if node is not None and self.ranks_per_node:
                return node * self.ranks_per_node + r.local
            if not self.multi_node:
                return r.local
            return None
        if r.label is not None and r.source not in self.nested_sources:
            return r.label
        return None

    def ranks(self, refs) -> list[int]:
        out = {self.resolve(r) for r in refs}
        out.discard(None)
        return sorted(out)  # type: ignore[arg-type]

    def hosts(self) -> dict[int, str]:
        """rank -> host, the surest evidence first; under `srun torchrun` srun's task ids are
        nodes, so their host goes to every rank printed under that srun label."""
        best: dict[int, tuple[int, str]] = {}
        node_host: dict[tuple[int, int], tuple[int, str]] = {}
        for ref, host, sure in self.c.host_refs:
            if ref.label is not None and ref.rank is None and ref.local is None and ref.source in self.nested_sources:
                if (ref.source, ref.label) not in node_host or sure > node_host[(ref.source, ref.label)][0]:
                    node_host[(ref.source, ref.label)] = (sure, host)
                continue
            r = self.resolve(ref)
            if r is not None and (r not in best or sure > best[r][0]):
                best[r] = (sure, host)
        if node_host:
            for ref in self.c.seen.values():
                got = node_host.get((ref.source, ref.label)) if ref.label is not None else None
                r = self.resolve(ref) if got is not None else None
                if got is not None and r is not None and (r not in best or got[0] > best[r][0]):
                    best[r] = got
        self.node_host = {k: h for k, (_, h) in node_host.items()}
        return {r: h for r, (_, h) in best.items()}

    def pids_to_ranks(self) -> None:
        """Findings that name only a process id (`Sending process P closing signal SIGTERM`)
        count for the rank that process was, when a launcher line or summary says so."""
        for rule_id, src, pid in self.c.pid_findings:
            ref = self.c.pid_ref.get((src, pid))
            g = self.c.symptoms.get(rule_id)
            if ref is None or g is None:
                continue
            r = self.resolve(ref)
            if r is not None:
                g.refs.setdefault(("pid", src, r), RankRef(src, rank=r))
