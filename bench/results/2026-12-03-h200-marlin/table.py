#!/usr/bin/env python3
"""The tables of run.sh's results folder: wavefuse `gemv_int4` (ab JSON, two rounds), Marlin and
torch INT4 (marlin_bench JSON) per K -> N and batch; then default vs tuned (ab JSON) and the new
store's entries. Usage: python3 table.py RESULTS_DIR (prints Markdown). RESULTS_DIR is what run.sh wrote:
`mkdir r && git show 10541be:bench/results/2026-12-03-h200-marlin/results.tgz | tar xz -C r`. The card named
in the header is the one in the results' provenance (`device.name` of the ab JSON, else marlin_bench's)."""

import glob
import json
import os
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ab_time(side):
    """Mean of an ab side's repeat medians (µs), and whether its check passed."""
    t = (side or {}).get("timing")
    if not t:
        return None, bool((side or {}).get("check", {}).get("pass"))
    meds = [r["median_us"] for r in t["repeats"]]
    return sum(meds) / len(meds), bool(side["check"]["pass"])


def ab_rows(d):
    for r in (d or {}).get("rows", []):
        yield r


def device_name(res):
    """The card that ran, from the first ab JSON's provenance (`device.name`), or None."""
    for path in sorted(glob.glob(os.path.join(res, "*.json"))):
        d = load(path) or {}
        name = (d.get("device") or {}).get("name")
        if name and str(d.get("schema", "")).startswith("wavefuse-ab"):
            return name
    return None


def fmt(v, spec=".2f"):
    return "–" if v is None else format(v, spec)


def main(res):
    wf = {}  # (k, n, batch) -> round -> (µs, ok, rel_l2)
    hand = {}
    for path in sorted(glob.glob(os.path.join(res, "wf-*-r*.json"))):
        rnd = path.rsplit("-r", 1)[1].split(".")[0]
        for r in ab_rows(load(path)):
            if r["kernel"] != "gemv_int4":
                continue
            k, n = (int(x) for x in r["dims"].split("→"))
            t, ok = ab_time(r["generated"])
            wf.setdefault((k, n, r["batch"]), {})[rnd] = (t, ok, r["generated"]["check"].get("rel_l2"),
                                                         r.get("timed_ranks"))
            hand.setdefault((k, n, r["batch"]), []).append(ab_time(r.get("manual"))[0])
    mb = load(os.path.join(res, "marlin.json")) or {}
    other = {}
    for r in mb.get("rows", []):
        other[(r["k"], r["n"], r["batch"], r["kernel"])] = r
    print(f"# issue 20: wavefuse `gemv_int4` vs Marlin vs `torch._weight_int4pack_mm`\n")
    dev = mb.get("device", {})
    card = device_name(res) or dev.get("name") or "an unrecorded device"
    print(f"{dev.get('name', '?')}, torch {mb.get('torch_version', '?')}; copy bandwidth "
          f"{fmt((mb.get('copy') or {}).get('gbps'), '.0f')} GB/s (marlin_bench); CUDA graphs, weights rotating "
          f"over >= 4 x L2; µs per call, measured on the {card}. wavefuse: `ab --timing graphs` (each round "
          f"the mean of its two repeats); Marlin / torch: two repeats, alternating.\n")
    print("| K → N | batch | wavefuse r1, r2 | Marlin r1, r2 | torch INT4 r1, r2 | Marlin / wavefuse | torch / wavefuse "
          "| checks rel L2 (wavefuse; Marlin before / after timing; torch) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    keys = sorted(set(list(wf) + [(k, n, b) for (k, n, b, _) in other]),
                  key=lambda x: ([(5120, 17408), (17408, 5120), (5120, 4352), (4352, 5120), (1536, 5120)].index(x[:2])
                                 if x[:2] in [(5120, 17408), (17408, 5120), (5120, 4352), (4352, 5120), (1536, 5120)]
                                 else 9, x))
    for key in keys:
        w = wf.get(key, {})
        wts = [w[r][0] for r in sorted(w) if w[r][0] is not None]
        wmean = sum(wts) / len(wts) if wts else None
        cells = []
        means = {}
        for name in ("marlin", "torch_int4"):
            r = other.get(key + (name,), {})
            reps = [x["median_us"] for x in r.get("repeats", [])]
            means[name] = sum(reps) / len(reps) if reps else None
            cells.append(", ".join(fmt(x) for x in reps) or ("error" if r.get("error") else "–"))
        ratio = lambda o: fmt(o / wmean, ".2f") + "×" if o and wmean else "–"  # noqa: E731
        mk = other.get(key + ("marlin",), {})
        tk = other.get(key + ("torch_int4",), {})
        after = (mk.get("repeats") or [{}])[0].get("check_after", {}).get("rel_l2")
        wchk = ", ".join(f"{fmt(w[r][2], '.1e')}{'' if w[r][1] else ' FAIL'}" for r in sorted(w))
        placement = next((w[r][3] for r in w if w[r][3]), "")
        print(f"| {key[0]} → {key[1]}{' (' + placement + ')' if 'alone' in placement else ''} | {key[2]} | "
              f"{', '.join(fmt(x) for x in wts)} | {cells[0]} | {cells[1]} | {ratio(means['marlin'])} | "
              f"{ratio(means['torch_int4'])} | {wchk}; {fmt(mk.get('check', {}).get('rel_l2'), '.1e')} / "
              f"{fmt(after, '.1e')}; {fmt(tk.get('check', {}).get('rel_l2'), '.1e')} |")
    if mb.get("errors"):
        print("\nmarlin_bench errors: " + "; ".join(e.splitlines()[0][:200] for e in mb["errors"]))

    # Default vs tuned.
    rows = {}
    for sched in ("def", "tuned"):
        for path in sorted(glob.glob(os.path.join(res, f"{sched}-r*.json"))):
            for r in ab_rows(load(path)):
                t, ok = ab_time(r["generated"])
                rows.setdefault((r["kernel"], r["shape"]), {}).setdefault(sched, []).append((t, ok))
    if rows:
        print("\n## Default vs tuned schedule, `ab --timing graphs`, alternating (µs per call)\n")
        print("| kernel | shape | default r1, r2 | tuned r1, r2 | tuned / default |")
        print("|---|---|---:|---:|---:|")
        for (k, s), v in rows.items():
            d = [t for t, _ in v.get("def", []) if t]
            u = [t for t, _ in v.get("tuned", []) if t]
            f = lambda l: ", ".join(f"{t:.2f}{'' if ok else ' FAIL'}" if t else "–" for t, ok in l)  # noqa: E731
            ratio = f"{(sum(u) / len(u)) / (sum(d) / len(d)):.3f}" if d and u else "–"
            print(f"| `{k}` | {s} | {f(v.get('def', []))} | {f(v.get('tuned', []))} | {ratio} |")
    store = os.path.join(res, "tuned.toml")
    if tomllib and os.path.exists(store):
        with open(store, "rb") as f:
            entries = tomllib.load(f).get("entry", [])
        print("\n## The new store (tune's finals, event windows)\n")
        print("| kernel | shape | median µs | default µs | default / winner | schedule differs from the default |")
        print("|---|---|---:|---:|---:|---|")
        for e in entries:
            same = "no" if e["median_us"] == e["default_median_us"] else "yes"
            print(f"| `{e['kernel']}` | {e['shape']} | {e['median_us']:.2f} | {e['default_median_us']:.2f} | "
                  f"{e['default_median_us'] / e['median_us']:.3f} | {same} |")
    ex = os.path.join(res, "exits.txt")
    if os.path.exists(ex):
        print("\n```\n" + open(ex).read() + "```")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
