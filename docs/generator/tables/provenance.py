"""The provenance page (``docs/provenance.md``): every result file under ``bench/results/``, the command that wrote
it, at which commit, when and where. Each table's source line links here instead of listing it."""

from __future__ import annotations

from report import machine_of, shown, unrecorded

from tables import Results, grid, table


@table("provenance")
def provenance(results: Results) -> str:
    rows = []
    for name in results.glob("**/*.json"):
        prov = results.load(name).get("provenance")  # load(): not a source of this table's own line
        if lacks := unrecorded(prov):
            rows.append((f"`{name}`", lacks, "", "", "", ""))
            continue
        commit = prov["commit"][:7] + (" (dirty)" if prov.get("dirty") else "")
        note = " (reconstructed from git)" if prov.get("reconstructed") else ""
        command = shown(prov["command"], prov.get("root")).replace("|", "\\|")
        rows.append((f"`{name}`", f"`{command}`{note}", commit, prov["date"][:10], machine_of(prov), prov["torch"]))
    return grid(["record", "command", "commit", "date", "machine", "torch"], rows)
