"""The tables later schema versions and features added to a recording (schema.py's ``TABLES`` ends
with them): folded kernels, ahead-of-time kernel builds, roofline costs and the memory ledger. Each is created with
``IF NOT EXISTS`` and older recordings lack it; readers treat a missing one as empty or "not
recorded". Kept apart so schema.py stays one page; the schema allow-list (schema_check.py) reads
``TABLES`` whole, so a table added here is allowed without more."""

LATER_TABLES = """
-- A kernel equal to an earlier one of the same graph and chain but for value names (a repeated
-- layer's, same fold key): its kernels row holds no code and no region IR, which are read from
-- the first instance (recording/kernel_folds.py). Older recordings have no folds.
CREATE TABLE IF NOT EXISTS kernel_folds (
    kernel_id INTEGER PRIMARY KEY,            -- kernels.id of the folded instance
    fold_of   INTEGER NOT NULL                -- kernels.id of the first instance, which holds the texts
);

-- Kernels compiled ahead of time for GPU targets (compiler/aot); data only, never executed.
CREATE TABLE IF NOT EXISTS kernel_builds (
    graph_id     INTEGER NOT NULL,
    chain        TEXT NOT NULL,
    kernel       TEXT NOT NULL,               -- kernels.name
    target       TEXT NOT NULL,               -- sm_90
    build_key    TEXT,                        -- kernel_build_stages.build_key (shared by identical kernels)
    status       TEXT NOT NULL,               -- ok | failed | unplanned | unfinished
    error        TEXT,
    seconds      REAL,
    registers    INTEGER,
    spills       INTEGER,                     -- local memory per thread in 4-byte words (Triton's n_spills)
    shared_bytes INTEGER,
    local_bytes  INTEGER,
    occupancy    REAL,                        -- theoretical, 0..1
    summary      TEXT NOT NULL,               -- JSON: plan, resources, occupancy, mix, functions, line_uids
    PRIMARY KEY (graph_id, chain, kernel, target)
);

CREATE TABLE IF NOT EXISTS kernel_build_stages (
    build_key TEXT NOT NULL,
    target    TEXT NOT NULL,
    stages    BLOB NOT NULL,                  -- zlib(JSON {source, stages: {stage: text}, lines: {stage: [...]}})
    PRIMARY KEY (build_key, target)
);

-- The roofline cost of each top-level symbol of a chain's final pass (compiler/roofline_cost.py).
CREATE TABLE IF NOT EXISTS symbol_costs (
    graph_id      INTEGER NOT NULL,
    chain         TEXT NOT NULL,
    position      INTEGER NOT NULL,           -- call order in the final trace
    uid           TEXT NOT NULL,
    name          TEXT NOT NULL,              -- the symbol (fw_fusion_3, prims.mm ...)
    kind          TEXT NOT NULL,              -- fusion | matmul | attention | conv | op | view
    bytes_read    INTEGER NOT NULL,
    bytes_written INTEGER NOT NULL,
    flops         INTEGER NOT NULL,
    precision     TEXT NOT NULL,              -- fp32 | bf16 | fp8 | fp64
    PRIMARY KEY (graph_id, chain, position)
);

-- The memory ledger of each forward/backward pair (compiler/ledger.py), from trace metadata only.
CREATE TABLE IF NOT EXISTS memory_graphs (
    graph_id      INTEGER PRIMARY KEY,
    policy        TEXT NOT NULL,              -- the remat policy that ran: off | auto
    saved_bytes   INTEGER NOT NULL,           -- distinct storages, parameters and buffers excluded
    saved_tensors INTEGER NOT NULL,           -- those storages
    parameters    INTEGER NOT NULL,
    gradients     INTEGER NOT NULL,
    peak_bytes    INTEGER NOT NULL,           -- static: parameters + the larger chain peak
    what_if_off   INTEGER NOT NULL,           -- bytes the off policy's saved values hold (views not merged)
    what_if_auto  INTEGER NOT NULL,
    error         TEXT                        -- why there is no ledger (then the rest is 0)
);

CREATE TABLE IF NOT EXISTS memory_saved (
    graph_id      INTEGER NOT NULL,
    position      INTEGER NOT NULL,           -- order among the forward's saved outputs
    name          TEXT NOT NULL,
    shape         TEXT NOT NULL,              -- JSON list of sizes
    dtype         TEXT NOT NULL,
    bytes         INTEGER NOT NULL,
    storage       TEXT NOT NULL,              -- the value whose storage it uses
    storage_bytes INTEGER NOT NULL,
    kind          TEXT NOT NULL,              -- new | parameter | input | view of ...
    counted       INTEGER NOT NULL,           -- 1: adds its storage to saved_bytes
    producer      TEXT NOT NULL,              -- the final forward's symbol (kernel) that made it
    op            TEXT NOT NULL,              -- the ATen op inside it
    file          TEXT NOT NULL,
    line          INTEGER NOT NULL,
    code          TEXT NOT NULL,
    module        TEXT NOT NULL,
    readers       TEXT NOT NULL,              -- JSON list of the backward symbols that read it
    why           TEXT NOT NULL,
    PRIMARY KEY (graph_id, position)
);

CREATE TABLE IF NOT EXISTS memory_decisions (
    graph_id  INTEGER NOT NULL,
    position  INTEGER NOT NULL,
    fx        TEXT NOT NULL,                  -- the joint graph's node name
    shape     TEXT NOT NULL,                  -- JSON list
    dtype     TEXT NOT NULL,
    bytes     INTEGER NOT NULL,
    op        TEXT NOT NULL,
    off       TEXT NOT NULL,                  -- saved | recomputed | not saved
    why_off   TEXT NOT NULL,
    auto      TEXT NOT NULL,
    why_auto  TEXT NOT NULL,
    PRIMARY KEY (graph_id, position)
);

CREATE TABLE IF NOT EXISTS memory_timeline (
    graph_id   INTEGER NOT NULL,
    chain      TEXT NOT NULL,
    position   INTEGER NOT NULL,              -- top-level symbol index in the final trace
    uid        TEXT NOT NULL,
    sym        TEXT NOT NULL,
    live_bytes INTEGER NOT NULL,
    PRIMARY KEY (graph_id, chain, position)
);

-- What a chain call really kept live, measured under run --profile (compiler/memory_measure.py);
-- recordings made before it have no such table.
CREATE TABLE IF NOT EXISTS memory_measured (
    graph_id       INTEGER NOT NULL,
    chain          TEXT NOT NULL,
    device         TEXT NOT NULL,
    method         TEXT NOT NULL,             -- torch.cuda.max_memory_allocated | torch.profiler memory events
    baseline_bytes INTEGER NOT NULL,          -- inputs live at the start that the static timeline counts
    peak_bytes     INTEGER NOT NULL,          -- allocated at the call's highest above its start
    PRIMARY KEY (graph_id, chain)
);

CREATE TABLE IF NOT EXISTS memory_peaks (
    graph_id INTEGER NOT NULL,
    chain    TEXT NOT NULL,
    bytes    INTEGER NOT NULL,
    position INTEGER NOT NULL,
    sym      TEXT NOT NULL,
    kernel   TEXT NOT NULL,
    file     TEXT NOT NULL,
    line     INTEGER NOT NULL,
    code     TEXT NOT NULL,
    module   TEXT NOT NULL,
    PRIMARY KEY (graph_id, chain)
);
"""
