"""Remediation placeholders with computed values (engine.template), and their load checks."""

from __future__ import annotations

import pytest

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.template import TemplateError, divisors, evaluate, names, near_multiples, parse, product, quotient, size
from slurmdoc.errors import RuleError


def test_helpers_compute_what_would_satisfy_a_divisibility_assert():
    assert divisors(28) == "1, 2, 4, 7, 14, 28"
    assert divisors("12") == "1, 2, 3, 4, 6, 12"
    assert divisors(0) is None and divisors("x") is None and divisors(10**13) is None
    assert near_multiples(28, 8) == "24 or 32" and near_multiples(5, 8) == "8" and near_multiples(32, 8) == "32"
    assert quotient(1024, 8) == 128 and quotient(1024, 3) is None and quotient(1, 0) is None
    assert product(2, "4") == 8 and product(2, "x") is None
    assert size("8589934592") == "8.00 GiB" and size(512) == "512 bytes" and size(-1) is None


def test_long_divisor_lists_are_elided():
    text = divisors(720720)
    assert text is not None and "..." in text and text.endswith("360360, 720720")


def test_parse_and_evaluate_nested_calls():
    e = parse("divisors(quotient(gbs, dp))")
    assert names(e) == {"gbs", "dp"}
    assert evaluate(e, {"gbs": "1024", "dp": "8"}) == "1, 2, 4, 8, 16, 32, 64, 128"
    assert evaluate(e, {"gbs": "1024"}) is None  # a missing value: no text, the line is dropped
    assert evaluate(parse("near_multiples(world_size, product(tp, pp, cp))"), {"world_size": "12", "tp": "4", "pp": "2"}) == "8 or 16"
    assert evaluate(parse("rank"), {"rank": 3}) == "3" and evaluate(parse("product(2, 3)"), {}) == "6"


@pytest.mark.parametrize("bad,why", [
    ("nosuch(a)", "unknown helper"),
    ("divisors(a, b)", "takes 1 argument"),
    ("divisors(a", r"missing '\)'"),
    ("a b", "unexpected"),
    ("a-b", "cannot read"),
])
def test_malformed_placeholders_are_rejected(bad, why):
    with pytest.raises(TemplateError, match=why):
        parse(bad)


def rule(tmp_path, fix: str):
    d = tmp_path / "r"
    d.mkdir(exist_ok=True)
    (d / "x.yaml").write_text(
        "title: t\ncategory: config_error\nrole: cause\nkeywords: [boom]\n"
        "patterns: ['boom (?P<n>\\d+)']\n"
        f"remediation: {{summary: s, fix: ['{fix}']}}\n"
        "examples: {match: ['boom 12'], no_match: ['x']}\n"
    )
    return str(d)


def test_the_loader_checks_computed_placeholders(tmp_path):
    assert load_rulebook([rule(tmp_path, "{divisors(n)}")]).by_id("x") is not None
    with pytest.raises(RuleError, match="unknown helper"):
        load_rulebook([rule(tmp_path, "{factors(n)}")])
    with pytest.raises(RuleError, match="'{m}' names no capture group"):
        load_rulebook([rule(tmp_path, "{divisors(m)}")])


def test_diagnosis_says_which_values_would_satisfy_the_assert(write):
    from slurmdoc.api import diagnose

    p = write("j.log", "[rank0]: AssertionError: num_attention_heads (28) must be divisible by tensor_model_parallel_size (8)")
    fix = diagnose([p]).root_cause.remediation_parts.fix
    assert any("Values of tensor_model_parallel_size that divide 28: 1, 2, 4, 7, 14, 28" in f and "24 or 32" in f for f in fix), fix
    p = write("k.log", "[rank0]: RuntimeError: world_size (12) is not divisible by tensor_model_parallel_size (8) x pipeline_model_parallel_size (1) x context_parallel_size (1)")
    fix = diagnose([p]).root_cause.remediation_parts.fix
    assert any("use 8 or 16 GPUs" in f and "divisors of 12: 1, 2, 3, 4, 6, 12" in f for f in fix), fix


def test_nesting_is_bounded_at_parse_so_evaluation_cannot_overflow():
    from slurmdoc.engine.template import MAX_DEPTH, TemplateError, evaluate, parse

    at_limit = parse("gcd(n, " * MAX_DEPTH + "n" + ")" * MAX_DEPTH)
    assert evaluate(at_limit, {"n": "12"}) == "12"
    for depth in (MAX_DEPTH + 1, 150, 5_000):
        field = "gcd(n," * depth + "n" + ")" * depth
        with pytest.raises(TemplateError, match="nested deeper|longer than"):
            parse(field)
    with pytest.raises(TemplateError, match=f"deeper than {MAX_DEPTH}"):
        parse("size(" * (MAX_DEPTH + 1) + "n" + ")" * (MAX_DEPTH + 1))


def test_placeholder_length_is_bounded():
    from slurmdoc.engine.template import MAX_CHARS, TemplateError, parse

    with pytest.raises(TemplateError, match="longer than"):
        parse("product(" + ", ".join(["a"] * MAX_CHARS) + ")")


def test_signal_helpers_read_every_way_a_signal_is_printed():
    from slurmdoc.engine.template import signal, signal_meaning

    # a Python exit code, a shell's 128+N, the number, the name: the same signal
    assert signal("-8") == signal("136") == signal("8") == signal("SIGFPE") == "SIGFPE (signal 8)"
    assert "floating-point" in signal_meaning("-8")
    assert signal("-64") == "signal 64"  # a real-time signal the table does not name
    assert signal("1") == "SIGHUP (signal 1)" and signal("SIGNOPE") is None and signal("abc") is None
    assert signal("0") is None and signal_meaning("200") is None


def test_signal_label_reads_a_shells_words_too_and_first_takes_the_first_value():
    from slurmdoc.engine.template import signal_label

    for forms, label in [
        (("-7", "135", "SIGBUS", "Bus error"), "SIGBUS, bus error"),
        (("-6", "134", "SIGABRT", "Aborted"), "SIGABRT, abort"),
        (("-8", "SIGFPE", "Floating point exception"), "SIGFPE, floating-point exception"),
        (("-4", "SIGILL", "Illegal instruction"), "SIGILL, illegal instruction"),
        (("-11", "139", "Segmentation fault"), "SIGSEGV, segmentation fault"),
    ]:
        assert {signal_label(f) for f in forms} == {label}, forms
    assert signal_label("-64") == "signal 64" and signal_label("no signal") is None
    # first(): a fact captured under different groups by different patterns
    e = parse("signal_label(first(signal, signum, exitcode))")
    assert evaluate(e, {"signum": "7"}) == evaluate(e, {"exitcode": "-7"}) == "SIGBUS, bus error"
    assert evaluate(e, {"signal": "Aborted", "exitcode": "-11"}) == "SIGABRT, abort"
    assert evaluate(e, {}) is None
