#!/usr/bin/env python3
"""libweft-mpi's coverage of the MPI interface, from the MPI's own header.

Every function an MPI's mpi.h declares is, for the layer, one of
  wrapped   defined in mpi/weft_mpi.c (it accounts for what the call does);
  passed    safe without a wrapper: it moves no message, makes no
            communicator and waits for no peer (the rule says why);
  refused   anything else: a generated wrapper that fails loudly at call
            time, naming the call and the reason, instead of letting a drain
            miss its traffic.

  coverage.py refusals --header MPI.i --layer mpi/weft_mpi.c --out FILE.c
      writes the refusing wrappers for one MPI (MPI.i: its mpi.h, run
      through its compiler wrapper's preprocessor); weft_mpi.c includes it.
  coverage.py doc --mpi NAME=MPI.i [--mpi ...] --layer mpi/weft_mpi.c --out FILE.md
      writes the table of docs/mpi-coverage.md for the MPIs named;
  coverage.py check (the same arguments) fails when FILE.md is not what
      doc would write.
"""
import argparse
import re
import sys

# (pattern on the name, reason): the first that matches decides. Order
# matters: the refusal rules for whole families come before the broad
# local rules whose prefixes they share (MPI_File_get_size is MPI-IO).
PASSED = [
    (r"_(c2f|f2c)$", "converts a handle between C and Fortran"),
    (r"^MPI_Comm_(rank|size|remote_size|group|remote_group|compare|test_inter|get_name|set_name|get_info|set_info"
     r"|get_parent)$", "a local query or setting of a communicator"),
    (r"^MPI_(Cart_(get|rank|coords|shift|map)|Cartdim_get|Graph_(get|neighbors|neighbors_count|map)|Graphdims_get"
     r"|Dist_graph_neighbors(_count)?|Topo_test|Dims_create)$", "a local query of a process topology"),
    (r"^MPI_Group_", "groups are local objects"),
    (r"^MPI_(Type_|Pack|Unpack|Get_address$|Address$|Get_count|Get_elements|Status_|Aint_)",
     "datatypes, packing and statuses are local"),
    (r"^MPI_(Op_|Reduce_local)", "operations and a local reduction move no message"),
    (r"(?i)(keyval|_attr$|^MPI_Attr_|_attr_)", "attribute caching is local"),
    (r"^MPI_Info_", "info objects are local"),
    (r"^MPI_(Error_|Add_error_|Errhandler_)|^MPI_Comm_(create|get|set|call)_errhandler$",
     "error classes, strings and handlers are local"),
    (r"^MPI_(Wtime|Wtick|Get_processor_name|Get_version|Get_library_version|Initialized|Finalized|Query_thread"
     r"|Is_thread_main|Pcontrol|Alloc_mem|Free_mem|Abort|Request_get_status|Grequest_start|Grequest_complete"
     r"|Test_cancelled|Buffer_attach|Buffer_detach)(_c)?$",
     "local (MPI_Abort ends the job; MPI_Buffer_detach waits for buffered sends, which MPI completes by itself)"),
    (r"^MPI_T_", "the tool information interface moves no message"),
]

REFUSED = [
    (r"^MPI_P(send|recv)_init(_c)?$", "MPI-4 partitioned communication: not wrapped yet"),
    (r"^MPI_(Send|Recv|Ssend|Bsend|Rsend|Mrecv|Imrecv)(_init)?_c$", "an MPI-4 large-count form: not wrapped yet"),
    (r"_init(_c)?$", "persistent collective: needs the clock across each start and completion"),
    (r"^MPI_(Win_|Put|Get$|Get_c$|Rput|Rget|Accumulate|Raccumulate|Get_accumulate|Rget_accumulate|Fetch_and_op"
     r"|Compare_and_swap)", "one-sided MPI: not wrapped yet"),
    (r"^MPI_(File_|Register_datarep)", "MPI-IO: collective file calls are not wrapped yet"),
    (r"^MPI_(Comm_spawn|Comm_accept|Comm_connect|Open_port|Close_port|Publish_name|Unpublish_name|Lookup_name"
     r"|Comm_join|Comm_disconnect)", "dynamic processes: not wrapped yet"),
    (r"^MPI_Comm_create_group$", "collective over the group only: the parent's clock cannot order it"),
    (r"^MPI_(Intercomm_create|Intercomm_merge|Comm_create_from_group"
     r"|Intercomm_create_from_groups)$", "a communicator constructor the layer does not wrap yet"),
    (r"^MPI_(Pready|Pready_list|Pready_range|Parrived)$", "MPI-4 partitioned communication: not wrapped yet"),
    (r"^MPI_Session_|^MPI_Group_from_session_pset", "MPI-4 sessions: not wrapped yet"),
    (r"^MPI_(Init|Finalize|Init_thread)$", "must be wrapped (weft starts and stops with MPI)"),
]
DEFAULT_REFUSAL = "moves messages or waits for peers, and is not wrapped yet"


def strip_attributes(text):
    """Drops every __attribute__((...)) (any nesting) from preprocessed C."""
    out, i = [], 0
    while True:
        j = text.find("__attribute__", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.index("(", j)
        depth = 0
        for m in range(k, len(text)):
            if text[m] == "(":
                depth += 1
            elif text[m] == ")":
                depth -= 1
                if depth == 0:
                    break
        i = m + 1


def declarations(preprocessed):
    """{name: (return type, parameter list)} of every MPI_ function declared."""
    text = strip_attributes(re.sub(r"\s+", " ", preprocessed))
    found = {}
    for m in re.finditer(r"(?<=[;}])\s*(?:extern\s+)?([A-Za-z_][\w ]*?\**)\s*\b(MPI_\w+)\s*\(((?:[^()]|\([^()]*\))*)\)"
                         r"\s*;", text):
        found[m.group(2)] = (m.group(1).strip(), m.group(3).strip())
    return found


def layer_definitions(source):
    """{name: 'wrapped' | 'refused'} of the MPI_ functions weft_mpi.c defines."""
    text = open(source).read()
    defined = {}
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^\w[\w ]*\b(MPI_\w+)\([^;{]*\)\s*\{", text, re.M)]
    for n, (pos, name) in enumerate(starts):
        body = text[pos:starts[n + 1][0] if n + 1 < len(starts) else len(text)]
        # A wrapper that refuses only some cases (MPI_Request_free of a
        # receive) still wraps the call.
        refuses_all = re.search(r"\{\s*(\(void\)[^;]*;\s*)?return refuse\(", body) is not None
        defined[name] = "refused" if refuses_all else "wrapped"
    return defined


def classify(name, layer):
    if layer.get(name) == "wrapped":
        return "wrapped", ""
    if re.search(PASSED[0][0], name):  # a handle conversion, whatever the family
        return "passed", PASSED[0][1]
    for pattern, reason in REFUSED:
        if re.search(pattern, name):
            return "refused", reason
    if name in layer:
        return "refused", DEFAULT_REFUSAL
    for pattern, reason in PASSED:
        if re.search(pattern, name):
            return "passed", reason
    if name.endswith("_c"):
        return "refused", "an MPI-4 large-count form: not wrapped yet"
    return "refused", DEFAULT_REFUSAL


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_refusals(header, layer_source, out):
    decls = declarations(open(header).read())
    layer = layer_definitions(layer_source)
    lines = ["/* Generated by mpi/coverage.py from this MPI's mpi.h: every function the",
             " * layer neither wraps nor passes through fails loudly when called. The",
             " * wrappers take the MPI's parameters and use none of them. */",
             '#pragma GCC diagnostic ignored "-Wunused-parameter"']
    count = 0
    for name in sorted(decls):
        status, reason = classify(name, layer)
        if status != "refused" or name in layer:
            continue
        ret, params = decls[name]
        lines.append("%s %s(%s) {" % (ret, name, params or "void"))
        if ret == "int":
            lines.append("    return refuse(%s, %s);" % (c_string(name), c_string(reason)))
        else:  # refuse ends the job; the value is never seen
            lines.append("    refuse(%s, %s);" % (c_string(name), c_string(reason)))
            lines.append("    %s none;" % ret)
            lines.append("    memset(&none, 0, sizeof none);")
            lines.append("    return none;")
        lines.append("}")
        count += 1
    with open(out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("coverage.py: %d refusing wrappers for %s" % (count, header))


def doc_text(mpis, layer_source):
    layer = layer_definitions(layer_source)
    decls = {label: declarations(open(path).read()) for label, path in mpis}
    names = sorted(set().union(*[set(d) for d in decls.values()]))
    labels = [label for label, _ in mpis]
    counts = {s: 0 for s in ("wrapped", "passed", "refused")}
    rows = []
    for name in names:
        status, reason = classify(name, layer)
        counts[status] += 1
        present = " | ".join("yes" if name in decls[label] else "" for label in labels)
        shown = {"wrapped": "wrapped", "passed": "passed through", "refused": "**refused**"}[status]
        rows.append("| `%s` | %s | %s | %s |" % (name, present, shown, reason))
    head = [
        "# libweft-mpi: every MPI function",
        "",
        "Generated by `mpi/coverage.py` from the `mpi.h` of each MPI below (run",
        "through its compiler wrapper's preprocessor) and from `mpi/weft_mpi.c`;",
        "`ctest -R mpi.coverage` fails when this file is stale. Regenerate with",
        "`ninja -C build mpi_coverage_doc`. What each status means is in",
        "docs/mpi-layer.md: **wrapped** calls are accounted for by a drain;",
        "**passed through** ones move no message, make no communicator and wait",
        "for no peer; **refused** ones abort the job when called, naming the call",
        "and the reason (the layer's wrapper for them is generated from the",
        "header, so no function is left out).",
        "",
        "%d functions: %d wrapped, %d passed through, %d refused." % (
            len(names), counts["wrapped"], counts["passed"], counts["refused"]),
        "",
        "| function | %s | status | why |" % " | ".join(labels),
        "|---|%s|---|---|" % "|".join("---" for _ in labels),
    ]
    return "\n".join(head + rows) + "\n"


def check_doc(text, path):
    """0 when the file at path holds text; else 1, with the first differences."""
    try:
        current = open(path).read()
    except OSError as e:
        print("coverage.py: %s: %s" % (path, e))
        return 1
    if current == text:
        print("coverage.py: %s is current" % path)
        return 0
    import difflib
    diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), path, "generated", lineterm="", n=0))
    print("coverage.py: %s is stale (rebuild it: ninja -C build mpi_coverage_doc); first differences:" % path)
    print("\n".join(diff[:40]))
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["refusals", "doc", "check"])
    ap.add_argument("--header", help="refusals: the MPI's preprocessed mpi.h")
    ap.add_argument("--mpi", action="append", default=[], help="doc: LABEL=preprocessed mpi.h (repeatable)")
    ap.add_argument("--layer", required=True, help="mpi/weft_mpi.c")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.what == "refusals":
        if not a.header:
            ap.error("refusals needs --header")
        write_refusals(a.header, a.layer, a.out)
        return 0
    mpis = [tuple(m.split("=", 1)) for m in a.mpi]
    if not mpis or any(len(m) != 2 for m in mpis):
        ap.error("doc and check need --mpi LABEL=FILE")
    text = doc_text(mpis, a.layer)
    if a.what == "check":
        return check_doc(text, a.out)
    with open(a.out, "w") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
