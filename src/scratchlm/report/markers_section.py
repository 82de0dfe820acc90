"""The report's template-marker lines: chat markers the data stage found in the corpus (data/marker_scan.py), per
source and with the first places, and how the shards encoded them (as text, never as special IDs)."""
from __future__ import annotations

SHOWN = 5  # places in the report; stats.json keeps up to data.marker_scan.MAX_LOCATIONS


def markers_lines(data: dict, shards: dict | None, table) -> list[str]:
    scan = data.get("template_markers")
    if scan is None:
        return []  # a data directory prepared before the scan
    md = ["", "### Template markers", ""]
    if not scan["found"]:
        return md + [f"No chat-template or special-token markers in {scan['docs_scanned']:,} documents."]
    rows = [[source, f"`{marker}`", n] for source, counts in scan["per_source"].items() for marker, n in counts.items()]
    places = [[p["file"], p["line"], f"`{p['marker']}`", p["context"]] for p in scan["locations"][:SHOWN]]
    md += [(f"{scan['docs_with_markers']:,} of {scan['docs_scanned']:,} documents write a chat or special-token "
            "marker in their text. They are kept: the tokenizer encodes such a marker as its characters, so none "
            "becomes a special token in the shards."), "", table(["source", "marker", "count"], rows), "",
           table(["file", "line", "marker", "context"], places)]
    if shards and "special_ids_in_text" in shards:
        md += ["", (f"In the shards: {sum(shards['markers_as_text'].values()):,} markers encoded as text, "
                    f"{shards['special_ids_in_text']:,} special IDs beyond each document's own BOS and EOS.")]
    return md
