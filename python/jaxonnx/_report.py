"""to_onnx(report=PATH): the conversion report, a markdown file saying what the
conversion did: the program's primitives and the plugin that lowered each, the
binding specs and rewrite rules that fired (with their declared numerics),
what the target profile changed or refused, the nodes per op type before and
after the optimizer (and per pass), verify's results when asked, and
onnxruntime's time per op type, charted in a PNG beside the markdown
(_report_chart.py). docs/report.md describes it.

The facts come from the core (Converted.facts: conversion_facts.hpp), the
binding window (_bindings.recording) and the traced program; gathering them
never changes the model. The path is checked before converting (check) and
the file written whole at the end (write), never half.
"""

from __future__ import annotations

import collections
import dataclasses
import os

from jaxonnx import _report_chart, _targets
from jaxonnx._core import ConversionError


@dataclasses.dataclass
class Request:
    """A report path checked before converting, and its chart's path beside it."""
    path: str
    chart_path: str


def _writable(path, what):
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise ConversionError(f"report: {what} {path!r} is a folder")
    if not os.path.isdir(folder):
        raise ConversionError(f"report: cannot write {what} {path!r}: the folder {folder!r} "
                              "does not exist")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ConversionError(f"report: cannot write {what} {path!r}: the file is not writable")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConversionError(f"report: cannot write {what} {path!r}: the folder {folder!r} "
                              "is not writable")


def check(report) -> Request | None:
    """The report option checked (None: no report): a str or PathLike naming a
    file whose folder exists and is writable, for the report and its chart
    (the path without its extension + "_profile.png"). Raises ConversionError."""
    if report is None or report is False:
        return None
    if not isinstance(report, (str, os.PathLike)) or not os.fspath(report):
        raise ConversionError(f"report must be a file path (str or os.PathLike); got {report!r}")
    path = os.fspath(report)
    if isinstance(path, bytes):
        raise ConversionError(f"report must be a str path, not bytes; got {report!r}")
    chart = os.path.splitext(path)[0] + "_profile.png"
    _writable(path, "the report")
    _writable(chart, "the report's chart")
    return Request(path, chart)


@dataclasses.dataclass
class Facts:
    """What to_onnx gathered for the report."""
    model_name: str
    target: str
    opset: int
    binding_level: str
    rule_level: str
    optimize: bool
    inputs: list          # [(name, "dtype[dims]")]
    program: object       # _trace.TracedProgram
    registry: object      # _core.Registry
    fired: collections.Counter  # binding specs: (plugin, primitive, target, numerics) -> calls
    core: dict            # Converted.facts
    times: dict           # Converted.times
    model_bytes: int
    verify: list | None = None       # _verify.verify_conversion's results, when asked
    profile: object = None           # _ort_profile.Profile
    profile_error: str | None = None


# ------------------------------------------------------------ markdown

def _cell(x):
    return str(x).replace("|", "\\|").replace("\n", " ")


def _table(header, rows):
    if not rows:
        return ["(none)", ""]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def _plugins(registry):
    """{plugin name: plugin dict} and {(plugin, rule): rule dict} of the registry."""
    plugins = {p["name"]: p for p in registry.plugins}
    rules = {(p["name"], r["name"]): r for p in registry.plugins for r in p["rules"]}
    return plugins, rules


def _numerics(d):
    note = d.get("numerics_note") or ""
    return d.get("numerics", "undeclared") + (f" ({note})" if note else "")


def _header(f):
    return [f"# Conversion report: {f.model_name}", "",
            "What jaxonnx did to convert this program (docs/report.md explains each section).", "",
            *_table(["setting", "value"], [
                ("target", f.target), ("opset", f.opset),
                ("fusion", f"binding specs {f.binding_level}, rewrite rules "
                           f"{f.rule_level if f.optimize else 'off (optimize=False)'}"),
                ("optimizer", "on" if f.optimize else "off: dead nodes removed only"),
                ("inputs", "; ".join(f"{n}: {t}" for n, t in f.inputs)),
                ("model size", f"{f.model_bytes} bytes (ModelProto, without external data)")])]


def _primitives_section(f, plugins):
    counts = collections.Counter(eqn.primitive.name for eqn, _ in f.program.equations())
    lowered = collections.defaultdict(list)
    for prim, plugin, n in f.core["lowered"]:
        lowered[prim].append((plugin, n))
    rows = []
    for prim in sorted(set(counts) | set(lowered)):
        for plugin, n in lowered.get(prim) or [(None, 0)]:
            if plugin is None:
                who, version, file = "(not lowered)", "", ""
            elif plugin == "":
                who, version, file = "jaxonnx core (onnx_function call site)", "", ""
            else:
                p = plugins.get(plugin, {})
                who, version, file = plugin, p.get("version", ""), p.get("file", "")
            rows.append((f"`{prim}`", counts.get(prim, 0), n, who, version, f"`{file}`" if file else ""))
    used = sorted({p for _, p, _ in f.core["lowered"] if p})
    return ["## Primitives and the plugins that lowered them", "",
            f"{sum(counts.values())} equations in the traced program (nested jaxprs included, "
            f"each call spelled out), {len(counts)} distinct primitives, lowered by "
            f"{len(used)} plugins. *Lowered* counts the equations each plugin lowered: an "
            "equation of an onnx_function body counts once per body, one after a scan or "
            "jit call once per call.", "",
            *_table(["primitive", "equations", "lowered", "plugin", "version", "file"], rows)]


def _bindings_section(f):
    rows = [(plugin, f"`{prim}`", f"`{target}`", numerics, n)
            for (plugin, prim, target, numerics), n in sorted(f.fired.items())]
    return ["## Binding specs that fired", "",
            "Calls that a plugin's binding spec routed to one primitive while tracing "
            f"(fusion level of the specs: {f.binding_level}).", "",
            *_table(["plugin", "primitive", "callable", "numerics", "calls"], rows)]


def _rules_section(f, rules):
    rows = []
    for plugin, rule, n in f.core["rules_fired"]:
        r = rules.get((plugin, rule), {})
        rows.append((plugin, f"`{rule}`", ", ".join(r.get("onnx_ops", [])), _numerics(r), n,
                     r.get("summary", "")))
    return ["## Rewrite rules that fired", "",
            f"Plugin rewrite rules the optimizer applied (fusion level of the rules: "
            f"{f.rule_level if f.optimize else 'none, the optimizer is off'}).", "",
            *_table(["plugin", "rule", "emits", "numerics", "applied", "what it does"], rows)]


def _target_section(f):
    profile = _targets.profiles()[f.target]
    lacks = [(w, "refused" if refused else "avoided", why) for w, refused, why in profile["lacks"]]
    changed, extra = [], []
    for asker, plugin, name, feature, answer, n in f.core["target_asked"]:
        row = ("lowering of" if asker == "lower" else "rule", plugin, f"`{name}`", f"`{feature}`", n)
        if not answer:
            changed.append(row)
        elif "." in feature:  # a domain the target runs beyond the standard
            extra.append(row)
    refused = [(plugin, f"`{prim}`", op, n) for plugin, prim, op, n in f.core["refused_nodes"]]
    widened = [(plugin, f"`{prim}`", op, f"{a} as {b}", n) for plugin, prim, op, a, b, n in f.core["widened"]]
    skipped = [(plugin, f"`{rule}`", op) for plugin, rule, op in f.core["rules_skipped"]]
    opset_note = (f"the target's default opset, {profile['default_opset']}"
                  if f.opset == profile["default_opset"]
                  else f"opset {f.opset} (as asked; the target's default is "
                       f"{profile['default_opset']})")
    return ["## What the target profile changed or refused", "",
            f"Target `{f.target}`: {profile['summary']}. The model declares {opset_note}.", "",
            "What the profile lacks (docs/targets.md):", "",
            *_table(["op or capability", "host", "why"], lacks),
            "Lowerings and rules that asked the target and were told it lacks what they asked "
            "for, so they chose another form:", "",
            *_table(["asked by", "plugin", "primitive or rule", "lacks", "times asked"], changed),
            *([] if not extra else [
                "Lowerings and rules that used an operator domain this target runs beyond the "
                "standard:", "",
                *_table(["asked by", "plugin", "primitive or rule", "domain", "times asked"], extra)]),
            "Nodes the host refused for this target (the lowering then failed or chose "
            "another form):", "",
            *_table(["plugin", "primitive", "op", "nodes"], refused),
            "Nodes computed in a wider type, onnxruntime's CPU provider having no kernel for "
            "theirs (or ONNX not allowing it; docs/plugin_author_guide.md, onnxruntime "
            "kernels):", "",
            *_table(["plugin", "primitive", "op", "computed", "nodes"], widened),
            "Rewrite rules left out because they may emit an op the target refuses:", "",
            *_table(["plugin", "rule", "refused op"], skipped)]


def _optimizer_section(f):
    before, after = f.core["nodes_lowered"], f.core["nodes_final"]
    rows = []
    for op in sorted(set(before) | set(after), key=lambda o: (-after.get(o, 0), -before.get(o, 0), o)):
        b, a = before.get(op, 0), after.get(op, 0)
        rows.append((op, b, a, f"{a - b:+d}" if a != b else "0"))
    total_b, total_a = sum(before.values()), sum(after.values())
    rows.append(("**total**", total_b, total_a,
                 f"{total_a - total_b:+d}" if total_a != total_b else "0"))
    passes = [(name, removed, f"{f.times.get('pass:' + name, 0.0) * 1e3:.2f}")
              for name, removed in f.core["pass_nodes_removed"]]
    return ["## Nodes before and after the optimizer", "",
            "Nodes per op type right after lowering and in the model written (main graph, "
            "subgraphs and function bodies).", "",
            *_table(["op type", "after lowering", "final", "change"], rows),
            *(["Per pass (nodes removed, summed over rounds and graphs; time in this run):", "",
               *_table(["pass", "nodes removed", "ms"], passes)] if f.optimize else
              ["The optimizer was off (optimize=False): only dead nodes were removed.", ""])]


def _verify_section(f):
    if f.verify is None:
        return ["## Verify", "", "Not asked (to_onnx verify=True, convert --verify).", ""]
    rows = [(r["at"], r["output"], r["max_abs_diff"], r["tolerance"]) for r in f.verify]
    return ["## Verify", "",
            "The model run in onnxruntime on random inputs and compared with JAX, every output "
            "within its tolerance:", "",
            *_table(["symbolic dims", "output", "max abs difference", "tolerance"], rows)]


def _profile_section(f, chart_name):
    head = ["## onnxruntime profile per op type", ""]
    if f.profile is None:
        return head + [f"No profile: {f.profile_error}", ""]
    p = f.profile
    total = sum(o.microseconds for o in p.ops) or 1.0
    rows = [(o.op_type, o.nodes, f"{o.microseconds:.1f}", f"{100 * o.microseconds / total:.1f}%")
            for o in p.ops]
    chart = ([f"![onnxruntime time per op type]({chart_name})", ""] if chart_name else
             ["(No chart: matplotlib is not installed; pip install matplotlib.)", ""])
    return head + [
        f"onnxruntime's profiler ({p.provider}, its default graph optimizations, so op types "
        f"are those it runs, fused ones included), mean over {p.runs} runs after a warm-up, "
        f"on random inputs {p.inputs}. Times vary from run to run and machine to machine.", "",
        *chart,
        *_table(["op type", "nodes", "microseconds per run", "share"], rows)]


def render(f, chart_name):
    plugins, rules = _plugins(f.registry)
    lines = (_header(f) + _primitives_section(f, plugins) + _bindings_section(f)
             + _rules_section(f, rules) + _target_section(f) + _optimizer_section(f)
             + _verify_section(f) + _profile_section(f, chart_name))
    return "\n".join(lines).rstrip() + "\n"


def write(request: Request, facts: Facts):
    """Draws the chart (when there is a profile and matplotlib), then writes the
    markdown through a temporary file beside it, so the report is whole or
    absent. Raises ConversionError when a file cannot be written."""
    chart_name = None
    try:
        if facts.profile is not None and facts.profile.ops and _report_chart.available():
            _report_chart.draw(request.chart_path, facts.profile.ops,
                               f"{facts.model_name}: onnxruntime time per op type")
            chart_name = os.path.basename(request.chart_path)
        text = render(facts, chart_name)
        tmp = f"{request.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, request.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as e:
        raise ConversionError(f"report: cannot write {request.path!r}: {e}") from None
    return request.path
