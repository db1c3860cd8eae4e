#!/usr/bin/env python3
"""Validates the Grafana dashboards in deploy/grafana/ (ctest deploy_dashboards_test).

Each dashboard must load as Grafana's dashboard model for schemaVersion >= 36: a uid and title,
a `panels` list whose panels have a unique integer id, a type, a title and a gridPos {h, w, x, y}
inside the 24-column grid without overlaps, and whose targets each have a refId and a PromQL
`expr`; `templating.list` with a Prometheus datasource variable that every panel and target uses,
and every `$variable` an expression names defined there (or one of Grafana's own).

Every metric an expression or variable query names must be one the binaries export: the names
registered in the C++ sources (`.Name("gpupool_…")`, the agent's `DCGM_FI_…` fields), with
`_bucket`/`_sum`/`_count` allowed only on histograms. The checker checks itself first: a
dashboard with a typo in a metric name, an unknown variable or overlapping panels must fail.

Usage: dashboards_test.py SOURCE_ROOT
"""
import copy
import glob
import json
import os
import re
import sys

BUILTIN_VARS = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s",
                "__all", "__name"}
PANEL_TYPES = {"row", "timeseries", "gauge", "stat", "bargauge", "table", "heatmap", "text",
               "piechart", "state-timeline", "status-history", "histogram"}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                "group_right", "bool", "offset", "inf", "nan"}
UID_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def exported_metrics(root):
    """(names, histograms) registered in the sources."""
    names, histograms = set(), set()
    for path in glob.glob(os.path.join(root, "*", "**", "*.cc"), recursive=True):
        if os.sep + "tests" + os.sep in path or os.sep + "build" in path:
            continue
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r'"((?:gpupool|DCGM_FI)_[A-Za-z0-9_]+)"', text):
            names.add(m.group(1))
            if "BuildHistogram" in text[max(0, m.start() - 120):m.start()]:
                histograms.add(m.group(1))
    return names, histograms


def metric_names(expr):
    """The metric names a PromQL expression selects."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)         # string literals
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                       # range selectors
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    out = []
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function
        if word.lower() in PROMQL_WORDS or word.startswith("$"):
            continue
        if m.start() > 0 and e[m.start() - 1] == "$":
            continue  # a $variable
        out.append(word)
    return out


def variables_in(text):
    return set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", text))


def check(name, d, names, histograms):
    errors = []
    err = errors.append
    for key in ("uid", "title", "panels", "templating", "schemaVersion"):
        if key not in d:
            err(f"{name}: missing '{key}'")
    if errors:
        return errors
    if not isinstance(d["schemaVersion"], int) or d["schemaVersion"] < 36:
        err(f"{name}: schemaVersion {d['schemaVersion']!r} is below 36")
    if not isinstance(d["uid"], str) or not UID_RE.match(d["uid"]):
        err(f"{name}: uid {d['uid']!r} is not 1-40 of [A-Za-z0-9_-]")
    if not isinstance(d["title"], str) or not d["title"]:
        err(f"{name}: empty title")

    variables = d["templating"].get("list", [])
    defined = set(BUILTIN_VARS)
    ds_vars = set()
    for v in variables:
        if not v.get("name") or not v.get("type"):
            err(f"{name}: a templating variable lacks name or type: {v}")
            continue
        defined.add(v["name"])
        if v["type"] == "datasource":
            if v.get("query") != "prometheus":
                err(f"{name}: datasource variable '{v['name']}' is not of type prometheus")
            ds_vars.add(v["name"])
    if not ds_vars:
        err(f"{name}: no Prometheus datasource variable in templating.list")
    for v in variables:
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.match(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", q)
        if not m:
            err(f"{name}: variable '{v['name']}' query {q!r} is not label_values(metric, label)")
            continue
        check_expr(f"{name}: variable '{v['name']}'", m.group(1), names, histograms, err)
        for var in variables_in(q) - defined:
            err(f"{name}: variable '{v['name']}' names undefined ${var}")

    ids = set()
    boxes = []
    for p in d["panels"]:
        where = f"{name}: panel {p.get('id')!r} ({p.get('title')!r})"
        if not isinstance(p.get("id"), int):
            err(f"{where}: id is not an integer")
        elif p["id"] in ids:
            err(f"{where}: duplicate id")
        ids.add(p.get("id"))
        if p.get("type") not in PANEL_TYPES:
            err(f"{where}: unknown type {p.get('type')!r}")
        if not isinstance(p.get("title"), str) or not p.get("title"):
            err(f"{where}: no title")
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in ("h", "w", "x", "y")):
            err(f"{where}: gridPos needs integer h, w, x, y: {g}")
            continue
        if g["w"] < 1 or g["h"] < 1 or g["x"] < 0 or g["y"] < 0 or g["x"] + g["w"] > 24:
            err(f"{where}: gridPos {g} is outside the 24-column grid")
        for other_where, o in boxes:
            if (g["x"] < o["x"] + o["w"] and o["x"] < g["x"] + g["w"] and
                    g["y"] < o["y"] + o["h"] and o["y"] < g["y"] + g["h"]):
                err(f"{where}: gridPos {g} overlaps {other_where}")
        boxes.append((where, g))
        if p.get("type") == "row":
            continue
        targets = p.get("targets")
        if not targets:
            err(f"{where}: no targets")
            continue
        for holder in [p] + targets:
            ds = holder.get("datasource", {})
            uid = ds.get("uid", "") if isinstance(ds, dict) else str(ds)
            if variables_in(uid) - ds_vars or not variables_in(uid):
                err(f"{where}: datasource {ds!r} is not the dashboard's datasource variable")
        refs = set()
        for t in targets:
            if not t.get("refId"):
                err(f"{where}: a target has no refId")
            elif t["refId"] in refs:
                err(f"{where}: duplicate refId {t['refId']}")
            refs.add(t.get("refId"))
            expr = t.get("expr", "")
            if not expr.strip():
                err(f"{where}: target {t.get('refId')} has no expr")
                continue
            if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                err(f"{where}: unbalanced brackets in {expr!r}")
            for var in variables_in(expr) - defined:
                err(f"{where}: expr names undefined ${var}: {expr!r}")
            check_expr(where, expr, names, histograms, err)
    return errors


def check_expr(where, expr, names, histograms, err):
    found = metric_names(expr)
    if not found:
        err(f"{where}: no metric in {expr!r}")
    for metric in found:
        if metric in names and metric not in histograms:
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", metric)
        if base != metric and base in histograms:
            continue
        err(f"{where}: metric '{metric}' is not exported by gpupoold or gpupool-agent")


def self_test(good, names, histograms):
    """The checker must catch what it claims to."""
    def broken(mutate):
        d = copy.deepcopy(good)
        mutate(d)
        return check("self-test", d, names, histograms)

    def first_target(d):
        return next(p for p in d["panels"] if p["type"] != "row")["targets"][0]

    cases = {
        "unknown metric": lambda d: first_target(d).update(expr="rate(gpupool_typo_total[5m])"),
        "_bucket on a gauge": lambda d: first_target(d).update(expr="gpupool_nodes_bucket"),
        "undefined variable": lambda d: first_target(d).update(expr='gpupool_nodes{pool=~"$nope"}'),
        "missing refId": lambda d: first_target(d).pop("refId"),
        "missing gridPos.h": lambda d: d["panels"][1]["gridPos"].pop("h"),
        "overlap": lambda d: d["panels"][2].update(gridPos=dict(d["panels"][1]["gridPos"])),
        "old schema": lambda d: d.update(schemaVersion=27),
        "no datasource variable": lambda d: d["templating"].update(
            list=[v for v in d["templating"]["list"] if v["type"] != "datasource"]),
    }
    failures = []
    for what, mutate in cases.items():
        if not broken(mutate):
            failures.append(f"self-test: the checker accepted a dashboard with {what}")
    return failures


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    names, histograms = exported_metrics(root)
    if not any(n.startswith("gpupool_") for n in names) or not any(n.startswith("DCGM") for n in names):
        print(f"found no exported metrics under {root}")
        return 1
    files = sorted(glob.glob(os.path.join(root, "deploy", "grafana", "*.json")))
    if len(files) < 2:
        print(f"expected the scheduler and agents dashboards in {root}/deploy/grafana")
        return 1
    errors = []
    uids = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            try:
                d = json.load(f)
            except json.JSONDecodeError as e:
                errors.append(f"{path}: not JSON: {e}")
                continue
        errors += check(os.path.basename(path), d, names, histograms)
        if d.get("uid") in uids:
            errors.append(f"{path}: uid {d.get('uid')} used twice")
        uids.add(d.get("uid"))
        errors += self_test(d, names, histograms)
        print(f"{os.path.basename(path)}: {len(d.get('panels', []))} panels checked")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
