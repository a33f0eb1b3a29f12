"""Advice from facts (diagnosis.advice): a rule's remediation filled for one root cause, its
conditional fix lines kept or left out by what the diagnosis knows (rank, ranks, phase, the job's
accounting and peak RSS, the log's own facts)."""

from __future__ import annotations

from slurmdoc.api import diagnose


# ---- conditional fix lines (engine.schema.FixWhen, advice.facts_of)


FACT_RULE = """\
title: Bad batch
category: python_exception
role: cause
priority: 60
keywords: ["BadBatch"]
patterns: ['BadBatch: (?P<what>\\w+)?']
remediation:
  summary: "{ranks} hit a bad batch"
  fix:
    - "always"
    - {if: [rank_zero, one_rank], text: "zero alone"}
    - {if: [rank_nonzero, one_rank], text: "rank {rank} alone"}
    - {if: all_ranks, text: "every rank"}
    - {unless: [one_rank, all_ranks], text: "generic"}
    - {if: what, text: "what {what}"}
    - {if: what=z, text: "what is z"}
    - {if: phase_backward, text: "in the {phase}"}
    - {unless: phase, text: "phase unknown"}
    - {if: [peak_rss, rss_at_limit], text: "peak {peak_rss} at the limit of job {job}"}
examples:
  match: ["BadBatch: x"]
  no_match: ["GoodBatch"]
"""


BACKWARD = [
    "Traceback (most recent call last):",
    '  File "/w/train.py", line 9, in <module>',
    "    backward_step(loss)",
    '  File "/w/schedules.py", line 368, in backward_step',
    "    torch.autograd.backward(loss)",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 825, in _engine_run_backward',
    "    return run_backward()",
]


def _fixes(write, lines, name="j.log", **kw):
    d = write("rules/bad-batch.yaml", FACT_RULE)
    from pathlib import Path

    rc = diagnose([write(name, "\n".join(lines) + "\n")], rule_dirs=[str(Path(d).parent)], **kw).root_cause
    assert rc is not None and rc.rule_id == "bad-batch"
    return list(rc.remediation_parts.fix)


def _ranks_log(failing, total=4, text="BadBatch: y"):
    out = [f"[rank{r}]: step 1 loss 2.0" for r in range(total)]
    return out + [f"[rank{r}]: {text}" for r in failing]


def test_a_conditional_line_shows_only_when_its_facts_hold(write):
    assert _fixes(write, _ranks_log([2])) == ["always", "rank 2 alone", "what y", "phase unknown"]
    assert _fixes(write, _ranks_log([0])) == ["always", "zero alone", "what y", "phase unknown"]
    assert _fixes(write, _ranks_log([0, 1, 2, 3])) == ["always", "every rank", "what y", "phase unknown"]
    # two of four: neither one rank nor all; no capture value, so `if: what` is out
    assert _fixes(write, _ranks_log([1, 3], text="BadBatch: ")) == ["always", "generic", "phase unknown"]
    # one printer, rank 2: whether the others raised it is not known, so neither `one_rank` nor `all_ranks`
    assert _fixes(write, ["[rank2]: BadBatch: y"], name="one.log") == ["always", "generic", "what y", "phase unknown"]


def test_the_phase_is_read_from_the_traceback_frames(write):
    lines = [f"[rank1]: {x}" for x in BACKWARD + ["BadBatch: z"]] + ["[rank0]: step 1 loss 2.0"]
    fixes = _fixes(write, lines)
    assert "in the backward pass" in fixes and "phase unknown" not in fixes
    assert "what is z" in fixes  # name=value: the capture's value is exactly z (it is y in the other tests)


def test_facts_from_the_job_accounting_fill_and_select_lines(write):
    from slurmdoc.slurm.models import JobTriage
    from slurmdoc.slurm.triage import job_facts

    acct = JobTriage(job_id="65", name="t", status="failed", state="FAILED", state_meaning="", exit_code="9:0", exit_meaning="",
                     derived_exit_code=None, derived_meaning="", category="killed", summary="", max_rss_bytes=500 << 20,
                     req_mem_per_node_bytes=512 << 20)
    fixes = _fixes(write, _ranks_log([2]), facts=job_facts("65", acct))
    assert "peak 500 MiB at the limit of job 65" in fixes
    low = acct.model_copy(update={"max_rss_bytes": 100 << 20})
    assert not any(f.startswith("peak") for f in _fixes(write, _ranks_log([2]), name="k.log", facts=job_facts("65", low)))


def test_bundled_advice_answers_with_facts_instead_of_generic_sentences(write):
    # the fallback on rank 2 alone speaks of rank 2, not of rank 0
    lines = [f"[rank{r}]: step 1 loss 2.0" for r in range(4)] + ["[rank2]: ValueError: bad value 7"]
    rem = diagnose([write("a.log", "\n".join(lines))]).root_cause.remediation
    assert "Only rank 2 raised it" in rem and "rank 0" not in rem
    # two of four ranks: what they share; one rank's output alone: rank 2's case, never rank 0's
    lines = [f"[rank{r}]: step 1 loss 2.0" for r in range(4)] + [f"[rank{r}]: ValueError: bad value 7" for r in (1, 3)]
    rem = diagnose([write("a2.log", "\n".join(lines))]).root_cause.remediation
    assert "Raised on ranks 1, 3, not on every rank" in rem and "rank 0" not in rem
    rem = diagnose([write("a3.log", "[rank2]: ValueError: bad value 7")]).root_cause.remediation
    assert "If only rank 2 raised it" in rem and "rank 0" not in rem
    # a CUDA OOM whose frames show the backward pass says so instead of asking for the phase
    oom = [f"[rank3]: {x}" for x in BACKWARD + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]]
    rem = diagnose([write("b.log", "\n".join(oom + ["[rank0]: step 1 loss 2.0"]))]).root_cause.remediation
    assert "backward pass" in rem and "the phase (forward / backward" not in rem


def test_a_symptom_standing_in_for_a_missing_cause_does_not_point_at_a_root_cause_above(write):
    lines = ["[rank0]: step 1 loss 2.0", "[rank1]: step 1 loss 2.0",
             "[rank0]: RuntimeError: [/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:17550"]
    rc = diagnose([write("a.log", "\n".join(lines))]).root_cause
    assert rc.promoted and rc.category == "nccl_error"
    assert "No rank's own error is in this log" in rc.remediation and "root cause above" not in rc.remediation


def test_the_peak_rss_a_log_shows_answers_the_advice_when_the_accounting_does_not(write):
    lines = ["0: step 1", "1: step 1", "srun: error: n2: task 1: Killed", "\tMaximum resident set size (kbytes): 5242880"]
    rem = diagnose([write("a.log", "\n".join(lines))]).root_cause.remediation_parts
    assert any("Peak RSS 5.00 GiB (from the log)" in f for f in rem.fix)
    # the kernel's OOM report names it too; the bigger of the two is the peak
    lines += ["[1234567.890] Out of memory: Killed process 4411 (python) total-vm:123456kB, anon-rss:9437184kB"]
    rc = diagnose([write("b.log", "\n".join(lines))]).root_cause
    assert rc.category == "host_oom" and any("Peak RSS 9.00 GiB (from the log)" in f for f in rc.remediation_parts.fix)
    # with the job's accounting, sacct's MaxRSS is the one named
    from slurmdoc.slurm.models import JobTriage
    from slurmdoc.slurm.triage import job_facts

    acct = JobTriage(job_id="7", name="t", status="failed", state="FAILED", state_meaning="", exit_code="9:0", exit_meaning="",
                     derived_exit_code=None, derived_meaning="", category="killed", summary="", max_rss_bytes=300 << 20,
                     req_mem_per_node_bytes=512 << 20)
    rem = diagnose([write("c.log", "\n".join(lines[:4]))], facts=job_facts("7", acct)).root_cause.remediation_parts
    assert any("300 MiB, from sacct's MaxRSS" in f and "512 MiB per node" in f for f in rem.fix)
    assert not any("sacct -j" in f for f in rem.fix)


def test_property_a_conditional_line_shows_exactly_when_all_its_ifs_and_none_of_its_unlesses_hold(tmp_path):
    import dataclasses

    from hypothesis import given
    from hypothesis import strategies as st

    from slurmdoc.diagnosis.advice import remediation
    from slurmdoc.engine.loader import load_pack

    names = ["rank_zero", "one_rank", "all_ranks", "rss_at_limit", "what", "what=y"]
    d = tmp_path / "p"
    d.mkdir()
    (d / "bad-batch.yaml").write_text(FACT_RULE)
    rule = load_pack(d, "user")[0]

    @given(facts=st.fixed_dictionaries({n: st.booleans() for n in names[:4]}), what=st.sampled_from([None, "y", "z"]),
           ifs=st.lists(st.sampled_from(names), max_size=3), unless=st.lists(st.sampled_from(names), max_size=3))
    def check(facts, what, ifs, unless):
        line = {"text": "the line"}
        if ifs:
            line["if"] = ifs
        if unless:
            line["unless"] = unless
        spec = rule.spec.model_copy(update={"remediation": rule.spec.remediation.model_validate(
            {"summary": "s", "fix": ["always", line] if (ifs or unless) else ["always"]})})
        r = dataclasses.replace(rule, spec=spec)
        caps = {"what": what} if what is not None else {}
        holds = {**facts, "what": what is not None, "what=y": what == "y"}
        want = bool(ifs or unless) and all(holds[n] for n in ifs) and not any(holds[n] for n in unless)
        got = remediation(1, r, caps, facts=facts).fix
        assert got == (("always", "the line") if want else ("always",))

    check()


def test_the_job_id_of_a_default_output_name_fills_the_sacct_command(write):
    lines = ["0: step 1", "1: step 1", "srun: error: n2: task 1: Killed"]
    rem = diagnose([write("slurm-4242.out", "\n".join(lines))]).root_cause.remediation
    assert "sacct -j 4242 " in rem and "<job>" not in rem
    rem = diagnose([write("train.log", "\n".join(lines))]).root_cause.remediation
    assert "sacct -j <job> " in rem


def test_seen_category_facts_tell_what_else_the_log_shows(write):
    killed = ["0: step 1", "1: step 1", "srun: error: n2: task 1: Killed"]
    rem = diagnose([write("a.log", "\n".join(killed))]).root_cause.remediation
    assert "If the job also hit its time limit" in rem
    limit = "slurmstepd: error: *** JOB 77 ON n2 CANCELLED AT 2025-03-01T10:00:00 DUE TO TIME LIMIT ***"
    d = diagnose([write("b.log", "\n".join(killed + [limit]))])
    text = "\n".join(d.root_cause.remediation_parts.fix)
    assert d.root_cause.rule_id == "killed-sigkill" and "The job also hit its time limit" in text
    assert "If the job also hit its time limit" not in text


def test_a_slurm_variable_set_only_for_an_option_asks_for_the_option_not_for_srun(write):
    # srun started the task, but Slurm sets some variables only when the job asked for what
    # they count (cpus per task, an array, tasks per node, GPUs): the advice names the option
    # and does not tell the user to start the script with srun
    tb = ["Traceback (most recent call last):", '  File "prep.py", line 8, in <module>',
          "    workers = int(os.environ['{v}'])", "KeyError: '{v}'"]
    for var, option in (("SLURM_CPUS_PER_TASK", "--cpus-per-task"), ("SLURM_ARRAY_TASK_ID", "--array"),
                        ("SLURM_NTASKS_PER_NODE", "--ntasks-per-node"), ("SLURM_GPUS_ON_NODE", "--gpus")):
        d = diagnose([write(f"{var}.log", "\n".join(t.format(v=var) for t in tb))])
        rem = d.root_cause.remediation
        assert d.root_cause.category == "config_error" and option in rem and "start the script with srun" not in rem, (var, rem)
    # a task variable srun always sets still says the script was not started by srun
    d = diagnose([write("procid.log", "\n".join(t.format(v="SLURM_PROCID") for t in tb))])
    assert "start the script with srun" in d.root_cause.remediation
