"""Liveness (diagnosis.liveness): failure-like findings their printer outlived are handled,
never the root cause; real failures are not swallowed."""

from __future__ import annotations

from slurmdoc.api import diagnose

TB = ["Traceback (most recent call last):", '  File "loader.py", line 40, in fetch', "ConnectionResetError: [Errno 104] Connection reset by peer"]


def prefixed(prefix: str, lines: list[str]) -> list[str]:
    return [prefix + line for line in lines]


def test_progress_of_a_tagged_printer_does_not_outlive_an_untagged_error(write):
    # an error printed with no prefix, then progress from a printer named only by a tag or a
    # host (a Ray worker `(Trainer pid=7)`, `node-2: `): another process's progress, which
    # says nothing of whether the one that erred went on
    for tag in ("(Trainer pid=7) ", "(Trainer pid=7, ip=10.0.0.2) ", "node-2: "):
        text = ["step 1 loss 2.0"] + TB + [tag + "epoch 0, step 2", tag + "epoch 0, step 3"]
        d = diagnose([write("j.log", "\n".join(text))])
        assert d.status == "failed" and "Connection reset" in d.root_cause.message, tag
    # the same progress printed untagged is the one printer's: the error was handled
    d = diagnose([write("j.log", "\n".join(["step 1 loss 2.0"] + TB + ["epoch 0, step 2", "epoch 0, step 3"]))])
    assert d.status == "no_failure" and len(d.handled) == 1


def test_a_traceback_followed_by_progress_on_the_same_rank_is_handled(write):
    text = prefixed("[rank1]: ", ["step 10 loss 2.0"] + TB + ["step 11 loss 1.9", "step 12 loss 1.8"])
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "no_failure" and d.root_cause is None
    (h,) = d.handled
    assert h.rank == 1 and "Connection reset" in h.message and h.evidence == "traceback" and h.resumed_at.endswith(":6")  # its last progress line


def test_progress_on_another_rank_does_not_hide_a_failure(write):
    text = prefixed("[rank1]: ", ["step 10 loss 2.0"] + TB) + prefixed("[rank0]: ", ["step 11 loss 1.9", "step 12 loss 1.8"])
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.rank == 1 and not d.handled


def test_progress_before_the_traceback_does_not_count(write):
    text = ["step 10 loss 2.0", "step 11 loss 1.9"] + TB
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and "Connection reset" in d.root_cause.message


def test_the_only_stream_of_a_plain_log_counts_as_one_printer(write):
    text = ["step 10 loss 2.0"] + TB + ["step 11 loss 1.9"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "no_failure" and len(d.handled) == 1


def test_a_later_failure_after_a_handled_one_is_the_root(write):
    text = ["step 10 loss 2.0"] + TB + ["step 11 loss 1.9", "Traceback (most recent call last):", '  File "t.py", line 9, in step', "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.root_cause.category == "cuda_oom" and [h.message[:20] for h in d.handled] == ["ConnectionResetError"]


def test_a_clean_end_for_the_job_covers_earlier_tracebacks(write):
    text = prefixed("[rank0]: ", TB) + ["I1122 09:30:01.000000 140 torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish."]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "no_failure" and d.handled[0].resumed_at.endswith(":4")


def test_a_clean_end_said_by_one_rank_covers_only_that_rank(write):
    text = prefixed("[rank1]: ", TB) + prefixed("[rank0]: ", ["Training completed in 1:02:03."])
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.rank == 1


def test_a_launcher_failure_report_is_never_outlived(write):
    text = ["step 10 loss 2.0", "srun: error: n1: task 0: Exited with exit code 1", "step 11 loss 1.9"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed"


def test_steps_redrawn_after_a_traceback_are_not_new_progress(write):
    # a progress bar that repaints steps the rank had already reached before it failed (a
    # tqdm line flushed again, a logger repeating its last line) says nothing of the rank
    # going on; only a step beyond every earlier one does
    redraw = prefixed("[rank1]: ", ["step 10 loss 2.0", "step 11 loss 1.9"] + TB + ["step 10 loss 2.0", "step 11 loss 1.9"])
    d = diagnose([write("j.log", "\n".join(redraw))])
    assert d.status == "failed" and d.root_cause.rank == 1 and "Connection reset" in d.root_cause.message and not d.handled
    onward = prefixed("[rank1]: ", ["step 10 loss 2.0", "step 11 loss 1.9"] + TB + ["step 11 loss 1.9", "step 12 loss 1.8"])
    d = diagnose([write("j.log", "\n".join(onward))])
    assert d.status == "no_failure" and d.handled[0].resumed_at.endswith(":7")


def _steps(first: int, last: int, norm: str) -> list[str]:
    return [f"step {i} | loss 0.0 | grad_norm: {norm} | lr 2e-05" for i in range(first, last)]


def test_a_report_repeated_until_the_end_is_not_outlived(write):
    # every step from some point on prints the same failure-like report while the steps
    # advance: the run diverged and never recovered, whatever progress the lines show
    text = _steps(1, 5, "0.8") + _steps(5, 30, "nan")
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.category == "numerical"
    assert d.root_cause.source.endswith(":5")  # the first of them


def test_a_repeated_report_followed_by_progress_is_outlived(write):
    # the same report for a few steps, then finite steps again: it recovered
    text = _steps(1, 5, "0.8") + _steps(5, 8, "nan") + _steps(8, 30, "0.7")
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "no_failure" and d.handled and d.handled[0].resumed_at.endswith(":29")  # the last line


def test_a_state_held_until_a_clean_end_is_not_outlived_by_the_end(write):
    # the loss went nan and stayed nan until the trainer said it finished: the run ended in
    # that state, so its clean end says nothing of a recovery
    text = _steps(1, 5, "0.8") + _steps(5, 9, "nan") + ["Training completed. Saving the final model to ./out"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.category == "numerical"
    # finite steps after it, then the clean end: it recovered, as before
    text = _steps(1, 5, "0.8") + _steps(5, 8, "nan") + _steps(8, 12, "0.7") + ["Training completed. Saving the final model to ./out"]
    d = diagnose([write("k.log", "\n".join(text))])
    assert d.status == "no_failure" and d.handled


def test_a_state_held_until_a_ranks_own_clean_end_is_not_outlived_by_it(write):
    # the same, printed by one rank with its prefix: its own end line is no recovery either
    end = "Training completed. Saving the final model to ./out"
    text = prefixed("[rank0]: ", _steps(1, 5, "0.8") + _steps(5, 9, "nan") + [end])
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.category == "numerical" and d.root_cause.rank == 0
    text = prefixed("[rank0]: ", _steps(1, 5, "0.8") + _steps(5, 8, "nan") + _steps(8, 12, "0.7") + [end])
    d = diagnose([write("k.log", "\n".join(text))])
    assert d.status == "no_failure" and d.handled


def test_an_error_recurring_between_steps_is_outlived_from_its_first_line(write):
    # a side service's error printed again and again while the steps advance (a metrics
    # uploader failing): an event, not a state; the run outlived it even though the log
    # happens to end on one of its repetitions
    text = []
    for i in (44, 60, 83):
        text += [f"Epoch 0:   1%|▋         | {i}/4943 [00:11<21:31,  3.79it/s, loss=7.11]", "uploader: ERROR Error while calling the metrics API: internal error (500)"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "no_failure" and d.handled


def test_a_process_end_reported_again_after_progress_is_not_outlived(write):
    # a report that a process was killed, steps, then the same report again (an issue thread
    # re-quoting the end of the run with the lines before it, or the end seen once more): the
    # process ended after those steps, so they do not outlive it
    kill = "/jobs/fit.sh: line 12:  5120 Killed                  python fit.py"
    text = [kill, "step 900 | loss 1.2", "step 910 | loss 1.1", kill]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.category == "killed"
    # reported once, with steps after it: the printer went on, as before
    d = diagnose([write("k.log", "\n".join(text[:3]))])
    assert d.status == "no_failure" and d.handled


def test_unprefixed_progress_does_not_outlive_an_error_when_a_process_is_reported_failed(write):
    # no prefixes: the lines are read as one printer, unless Slurm (or a launcher) reports a
    # failed process after the error; then the steps after it may be another process's
    tb = TB[:-1] + ["ValueError: bad batch at step 2"]
    text = ["step 1 loss 2.0"] + tb + ["srun: error: n1: task 1: Exited with exit code 1", "step 2 loss 1.9", "step 3 loss 1.8"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and "bad batch" in d.root_cause.message
    # without the report the same lines are one process that went on
    d = diagnose([write("k.log", "\n".join(text[:4] + text[5:]))])
    assert d.status == "no_failure"


def test_a_launchers_timed_failure_report_after_an_unprefixed_error_keeps_it_alive(write):
    # an unprefixed error, a bar drawn by some process, then the launcher's own record (behind
    # a logging formatter's time) that a worker failed: several processes print here, and the
    # bar does not show that the one that erred went on
    lines = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 198.00 MiB.", "  0%|          | 0/25 [00:00<?, ?it/s]",
             "[2024-04-20 18:56:38,931] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 358104) of binary: /usr/bin/python3"]
    d = diagnose([write("j.log", "\n".join(lines))])
    assert d.status == "failed" and d.root_cause.category == "cuda_oom" and d.root_cause.source.endswith(":1")


def test_progress_in_another_pasted_excerpt_does_not_outlive_an_error(write):
    # a paste of two fenced excerpts: their order is the paster's (the error quoted first, the
    # run's progress bars below it), so the second's steps do not show the erring printer went on
    fence = "```"
    for info in ("", "text", "console"):
        text = ["the run dies with:", fence + info] + TB + [fence, "and before that the bars read:", fence, "step 11 loss 1.9", "step 12 loss 1.8", fence]
        d = diagnose([write("j.log", "\n".join(text))])
        assert d.status == "failed" and "Connection reset" in d.root_cause.message and not d.handled, info
    # progress after the error inside its own excerpt still outlives it, whatever a later
    # excerpt holds (further steps, or earlier ones)
    for later in (["step 40 loss 1.2"], ["step 3 loss 2.8"], []):
        text = [fence, "step 10 loss 2.0"] + TB + ["step 11 loss 1.9", fence, "later:", fence] + later + [fence]
        d = diagnose([write("j.log", "\n".join(text))])
        assert d.status == "no_failure" and len(d.handled) == 1, later
    # the same lines with no fence are one excerpt, as before
    d = diagnose([write("j.log", "\n".join(TB + ["step 11 loss 1.9", "step 12 loss 1.8"]))])
    assert d.status == "no_failure" and len(d.handled) == 1


def test_any_programs_report_of_a_non_zero_exit_after_an_unprefixed_error_keeps_it_alive(write):
    # not only a launcher's or Slurm's words: a remote-exec wrapper, a runner, an IDE or a
    # subprocess call that reports a command ended with a non-zero status after the error says
    # the unprefixed lines are more than one process's (or that the erring one ended), so a
    # bar drawn between them does not show that the one that erred went on
    err = "RuntimeError: device allocator: out of device memory while running the step"
    bar = "  3%|3         | 9/300 [00:31<16:46,  3.46s/it]"
    reports = ("== Command on worker 2 failed with exit status 1. Continuing.", "job 'train' exited with code 3",
               "subprocess.CalledProcessError: Command '['bash', 'run.sh']' returned non-zero exit status 2.",
               "Process finished with exit code 1", "exit status 1")
    for report in reports:
        d = diagnose([write("j.log", "\n".join([err, bar, report, "Post-run analysis: graph size 2.3 GB"]))])
        assert d.status == "failed" and "device memory" in d.root_cause.message and d.root_cause.source.endswith(":1"), report
    # the same report with a zero status is a clean end of something else: the bar going on
    # outlives the error
    bar2 = "  3%|3         | 10/300 [00:34<16:43,  3.46s/it]"
    for report in ("== Command on worker 2 finished with exit status 0.", "job 'train' exited with code 0"):
        d = diagnose([write("j.log", "\n".join([err, bar, bar2, report]))])
        assert d.status == "no_failure" and len(d.handled) == 1, report


def test_a_fenced_block_a_run_prints_does_not_part_the_lines_around_it(write):
    # a program's own output may hold a fenced block (a model's sample, a Markdown report):
    # the lines around it are one run, so its progress after the block still outlives an
    # error it logged before it; only fenced excerpts are read apart from each other
    fence = "```"
    sample = ["eval sample 0:", fence + "python", "def add(a, b):", "    return a + b", fence]
    for after in (["step 11 loss 1.9", "step 12 loss 1.8"], ["step 11 loss 1.9", "Training completed."]):
        d = diagnose([write("j.log", "\n".join(["step 10 loss 2.0"] + TB + sample + after))])
        assert d.status == "no_failure" and len(d.handled) == 1, after
        # two samples, and one at the very start
        d = diagnose([write("j.log", "\n".join(sample + ["step 10 loss 2.0"] + TB + sample + sample + after))])
        assert d.status == "no_failure" and len(d.handled) == 1, after
    # a fenced excerpt stays apart from the text outside it, and from another fenced excerpt
    d = diagnose([write("j.log", "\n".join([fence] + TB + [fence, "then:", "step 11 loss 1.9", "step 12 loss 1.8"]))])
    assert d.status == "failed" and "Connection reset" in d.root_cause.message
    d = diagnose([write("j.log", "\n".join(TB + [fence, "step 11 loss 1.9", "step 12 loss 1.8", fence]))])
    assert d.status == "failed" and "Connection reset" in d.root_cause.message


def test_a_fence_glued_to_a_log_line_opens_or_closes_its_excerpt_too(write):
    # a paste's fence with the log's first line glued after it (Markdown takes the line for the
    # fence's info string), or its closing fence glued to the last line, still bounds its
    # excerpt: the excerpts after it pair up as fenced blocks, so another excerpt's progress
    # does not outlive the error in it
    fence = "```"
    glued_open = [fence + TB[0]] + TB[1:] + [fence]
    glued_close = [fence] + TB[:-1] + [TB[-1] + fence]
    later = ["and the bars before it:", fence, "step 11 loss 1.9", "step 12 loss 1.8", fence]
    for excerpt in (glued_open, glued_close):
        d = diagnose([write("j.log", "\n".join(["the run dies with:"] + excerpt + later))])
        assert d.status == "failed" and "Connection reset" in d.root_cause.message, excerpt
        # ... and progress within its own excerpt still outlives it
        inside = excerpt[:-1] + ["step 13 loss 1.7", "step 14 loss 1.6", excerpt[-1]] if excerpt is glued_open else [fence] + TB + ["step 13 loss 1.7", "step 14 loss 1.6" + fence]
        d = diagnose([write("j.log", "\n".join(["the run dies with:"] + inside + later))])
        assert d.status == "no_failure" and len(d.handled) == 1, inside


def test_a_failed_process_report_ends_the_failure_nearest_before_it_not_a_handled_earlier_one(write):
    # an unprefixed error the program handled (steps follow it), then another kind of error,
    # then a report that a process failed: the report is the end of the later error; the
    # earlier one stays handled, whoever reports the end (Slurm, an IDE, a wrapper)
    handled = ["Traceback (most recent call last):", '  File "cache.py", line 12, in load', "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/cache/idx.bin'"]
    fatal = ["Traceback (most recent call last):", '  File "train.py", line 90, in step', "RuntimeError: CUDA error: an illegal memory access was encountered"]
    for report in ("srun: error: n1: task 0: Exited with exit code 1", "Process finished with exit code 1", "== Command on worker 0 failed with exit status 1."):
        d = diagnose([write("j.log", "\n".join(["step 1 loss 2.0"] + handled + ["step 2 loss 1.9", "step 3 loss 1.8"] + fatal + [report]))])
        assert d.status == "failed" and d.root_cause.category == "cuda_error" and d.root_cause.source.endswith(":9"), report
        assert any("idx.bin" in h.message for h in d.handled), report
        # the same error repeated before the report (several processes printing it) stays alive
        # from its first line: the steps between may be another process's
        d = diagnose([write("j.log", "\n".join(["step 1 loss 2.0"] + fatal + ["step 2 loss 1.9"] + fatal + [report]))])
        assert d.status == "failed" and d.root_cause.category == "cuda_error" and d.root_cause.source.endswith(":4"), report


def test_one_progress_mark_after_an_error_shows_no_motion(write):
    # a printer is outlived by progress, that is by moving: a mark beyond one it printed before
    # (before the error or after it). A first mark alone after the error shows only where it
    # stood, such as a bar a dying process closes (printed once at its exit) or a summary
    # line: the error stays alive; a second mark that goes further, or one beyond a mark
    # printed before the error, outlives it
    err = ["Traceback (most recent call last):", '  File "train.py", line 7, in step', "RuntimeError: device lost while running the step"]
    for mark in ("  0%|          | 1/300 [12:22<61:42:17, 742.93s/it]", "step 1 loss 2.0", "Iteration 0, loss 18.4"):
        d = diagnose([write("j.log", "\n".join(err + [mark]))])
        assert d.status == "failed" and "device lost" in d.root_cause.message, mark
    d = diagnose([write("j.log", "\n".join(err + ["step 1 loss 2.0", "step 2 loss 1.9"]))])
    assert d.status == "no_failure" and len(d.handled) == 1
    d = diagnose([write("j.log", "\n".join(["step 1 loss 2.0"] + err + ["step 2 loss 1.9"]))])
    assert d.status == "no_failure" and len(d.handled) == 1
    # the same mark redrawn after the error is still no motion
    d = diagnose([write("j.log", "\n".join(["step 1 loss 2.0"] + err + ["step 1 loss 2.0"]))])
    assert d.status == "failed"


def test_a_loggers_summary_at_exit_after_an_uncaught_error_is_not_the_run_going_on(write):
    # a run that printed no step lines of its own (its progress went to an experiment tracker)
    # dies at an uncaught error; the tracker then prints its run summary as the process exits,
    # with lines of its own first and the last step it saw: one mark, where the run stood when
    # it died, not the run going on after the error
    err = ["Traceback (most recent call last):", '  File "train.py", line 70, in main', "RuntimeError: device lost while running the step"]
    for tracker in ("tracker: ", "[tracker] ", ""):
        summary = [tracker + w for w in ("syncing run files (exit code 1)", "", "run summary:", "           loss 0.4123", "    global_step 500")]
        text = [tracker + "run data saved under ./runs/abc", "loading dataset from /data/train"] + err + summary
        d = diagnose([write("j.log", "\n".join(text))])
        assert d.status == "failed" and "device lost" in d.root_cause.message, tracker


def test_a_sigterm_after_the_runs_clean_end_is_the_shutdown_of_what_was_left(write):
    # a script stops its helpers (a tensorboard, a logger, a GPU monitor) once training is
    # done, and their reporter says they ended by SIGTERM: the run ended cleanly before that
    run = ["step 1 loss 2.3", "step 2 loss 2.1", "Training completed in 0:10:00. Saving the final model."]
    for report in ("Process tensorboard exited with signal SIGTERM", "gpu monitor (pid 812) terminated by signal 15",
                   "<Process name='log-follower' pid=91 parent=90 stopped exitcode=-SIGTERM>"):
        d = diagnose([write("j.log", "\n".join(run + [report]))])
        assert d.status == "no_failure", report
        (h,) = d.handled
        assert h.resumed_at.endswith(":3"), report  # cited at the end it followed
        # the same report said for the job's launcher (a torchrun agent's clean end)
        d = diagnose([write("j.log", "\n".join(run[:2] + ["I1122 09:30:01.000000 140 torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish.", report]))])
        assert d.status == "no_failure", report
        # a failure between the end and the SIGTERM: the SIGTERM is its echo, and it leads
        fatal = ["Traceback (most recent call last):", '  File "save.py", line 9, in save', "OSError: [Errno 28] No space left on device"]
        d = diagnose([write("j.log", "\n".join(run + fatal + [report]))])
        assert d.status == "failed" and d.root_cause.category == "io_error" and d.symptoms, report
    # other ends are failures whatever came before them: a kill is no request to stop, and the
    # scheduler's time limit says why it stopped the job
    for report, category in (("the logger process was killed by signal 9", "killed"), ("Segmentation fault (core dumped)", "segfault"),
                             ("slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2026-01-01T10:00:00 DUE TO TIME LIMIT ***", "time_limit")):
        d = diagnose([write("j.log", "\n".join(run + [report]))])
        assert d.status == "failed" and d.root_cause.category == category, report
    # one rank's own end covers only that rank's SIGTERM
    text = prefixed("[rank0]: ", run) + ["[rank1]: worker (pid 7) terminated by signal SIGTERM"]
    assert diagnose([write("j.log", "\n".join(text))]).status == "failed"
    text = prefixed("[rank0]: ", run + ["worker (pid 7) terminated by signal SIGTERM"])
    assert diagnose([write("j.log", "\n".join(text))]).status == "no_failure"


def test_a_numerical_state_repeated_between_steps_is_judged_by_its_last_repetition(write):
    # whichever rule reads it (a trainer's own check, a metric printed as nan, a tensor's
    # values), a non-finite loss or value is a state of the run: a report repeated while the
    # steps advance is outlived only by steps after its last repetition, as the rule pack says
    # of every numerical rule that reads a line (tests/test_rulepack.py)
    steps = [f"[INFO] step {i}/5000 | loss 2.{i:03d} | lr 3.0e-04" for i in range(100, 106)]
    for report in ("Loss is nan, stopping training",
                   "NaN detected in loss at this step",
                   "epoch 2 it 40 loss: nan",
                   "head.proj: tensor([[nan, nan, nan, nan, nan],"):
        text = [steps[0], report, steps[1], report, steps[2], report]
        d = diagnose([write("a.log", "\n".join(text))])
        assert d.status == "failed" and d.root_cause.category == "numerical", report
        d = diagnose([write("b.log", "\n".join(text + steps[3:]))])
        assert d.status == "no_failure" and d.handled, report
