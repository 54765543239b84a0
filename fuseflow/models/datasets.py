"""Graph, image and feature data for the model zoo — sparse from loading to the level arrays.

Every adjacency is a ``scipy.sparse.csr_array`` (symmetric 0/1, no self loops): nothing here
builds a dense N x N matrix, so graphs of OGB size load in seconds and the compiler's level
arrays are cut from the CSR arrays directly (:meth:`fuseflow.ir.tensor.TensorData.from_scipy`).

Where the data comes from (nothing is downloaded):

* **real graphs shipped with networkx** — ``karate`` (Zachary's karate club),
  ``les_miserables`` (character co-appearances), ``florentine_families`` (marriages between
  Renaissance Florentine families), ``davis_southern_women`` (women and the social events they
  attended, bipartite); node features are one-hot node ids unless ``features`` asks for random
  ones;
* **real images shipped with scikit-learn** — ``digits`` (8 x 8 handwritten digits, 1,797
  images) for the sparse autoencoder (:func:`digits`);
* **the user's files** — Matrix Market ``.mtx`` (``scipy.io.mmread``), scipy sparse ``.npz``,
  a Planetoid directory (the ``ind.<name>.graph`` / ``allx`` / ``tx`` / ``test.index`` files of
  Cora, CiteSeer, PubMed) and an OGB dataset directory (``raw/edge.csv.gz``, optional
  ``raw/node-feat.csv.gz`` and ``raw/num-node-list.csv.gz``);
* **synthetic stand-ins, labelled so** — ``cora``, ``citeseer``, ``pubmed`` and ``ogb_collab``
  generate a graph with the named dataset's node count and undirected edge count exactly, every
  node with at least one edge, a power-law degree distribution at the dataset's mean degree
  (Chung–Lu: edge ends drawn in proportion to power-law weights) with the largest degree near
  the dataset's published maximum where one is known (Cora 168, CiteSeer 99, PubMed 171), and node features of the
  dataset's width at its density (binary bag-of-words for Cora / CiteSeer, non-negative TF-IDF-like
  weights for PubMed, dense for OGB-Collab).  They have the dataset's size and sparsity, not its
  edges or labels; :attr:`GraphDataset.synthetic` is true and :meth:`GraphDataset.describe` says
  so.  ``uniform``, ``powerlaw`` and ``blockdiag`` are seeded generic graphs; with a density
  (:func:`synthetic_graph`) they have exactly ``round(density * n * n / 2)`` undirected edges.

Adjacency density, wherever this module takes one for a generic graph, is the non-zero fraction
of the whole ``n x n`` adjacency, ``nnz / (n * n)``, with no self loops: the diagonal is empty and
not counted out, so the densest graph is ``(n - 1) / n``.  (:class:`GraphDataset.describe` reports
the same fraction; GCN's normalisation adds the self loops afterwards.)
"""

from __future__ import annotations

import gzip
import itertools
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.io
import scipy.sparse as sp

__all__ = [
    "DATASETS",
    "MATCHED",
    "REAL_GRAPHS",
    "SYNTHETIC",
    "GraphDataset",
    "bigbird_mask",
    "block_diagonal",
    "cora_like",
    "digits",
    "gcn_normalize",
    "karate",
    "load_dataset",
    "load_graph_file",
    "matched_synthetic",
    "mean_normalize",
    "power_law",
    "random_features",
    "read_matrix",
    "real_graph",
    "synthetic_graph",
    "uniform_random",
]


@dataclass
class GraphDataset:
    """An undirected graph (sparse 0/1 adjacency, no self loops) with a node feature matrix."""

    name: str
    adjacency: sp.csr_array  # (n, n) float64, symmetric 0/1, sorted indices
    features: np.ndarray  # (n, f) float64
    synthetic: bool = False
    source: str = ""  # where the graph comes from, for describe()

    @property
    def num_nodes(self) -> int:
        return int(self.adjacency.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_edges(self) -> int:
        """Directed edges: twice the undirected ones."""
        return int(self.adjacency.nnz)

    def degrees(self) -> np.ndarray:
        return np.diff(self.adjacency.indptr)

    def describe(self) -> str:
        a_d = self.num_edges / self.num_nodes**2
        x_d = np.count_nonzero(self.features) / self.features.size
        label = f"{self.name} ({self.source})" if self.source else self.name
        return (f"{label}: {self.num_nodes} nodes, {self.num_edges // 2} undirected edges "
                f"(adjacency {100 * (1 - a_d):.3f}% sparse), {self.num_features} features "
                f"({100 * (1 - x_d):.2f}% sparse)")


def _csr(a) -> sp.csr_array:
    """A square 0/1 float64 CSR adjacency: symmetrised, self loops and explicit zeros removed."""
    c = sp.coo_array(a)
    keep = (c.row != c.col) & (c.data != 0)
    r, k = c.row[keep], c.col[keep]
    out = sp.csr_array((np.ones(2 * len(r)), (np.r_[r, k], np.r_[k, r])), shape=c.shape)
    out.sum_duplicates()
    out.data[:] = 1.0
    out.sort_indices()
    return out


def gcn_normalize(adj: sp.sparray) -> sp.csr_array:
    """Kipf & Welling: ``D^-1/2 (A + I) D^-1/2`` (sparse in, sparse out)."""
    a = (sp.csr_array(adj, dtype=np.float64) + sp.eye_array(adj.shape[0], format="csr")).tocsr()
    d = sp.diags_array(1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel()))
    out = (d @ a @ d).tocsr()
    out.sort_indices()
    return out


def mean_normalize(adj: sp.sparray) -> sp.csr_array:
    """GraphSAGE mean aggregation: ``D^-1 A`` (isolated nodes keep an all-zero row)."""
    a = sp.csr_array(adj, dtype=np.float64)
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    out = (sp.diags_array(inv) @ a).tocsr()
    out.sort_indices()
    return out


def random_features(n: int, f: int, density: float, seed: int) -> np.ndarray:
    """Binary bag-of-words style features with about ``density`` non-zeros (at least one per row)."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"feature density {density} must be in (0, 1]")
    rng = np.random.default_rng(seed)
    x = (rng.random((n, f)) < density).astype(np.float64)
    empty = ~x.any(axis=1)
    x[np.flatnonzero(empty), rng.integers(0, f, size=int(empty.sum()))] = 1.0
    return x


def _from_nx(g) -> sp.csr_array:
    try:
        order = sorted(g.nodes())
    except TypeError:  # names of mixed types
        order = sorted(g.nodes(), key=str)
    return _csr(nx.to_scipy_sparse_array(g, nodelist=order, weight=None, format="csr"))


# ----------------------------------------------------------------------------- real graphs
REAL_GRAPHS = {
    "karate": (nx.karate_club_graph, "Zachary's karate club, networkx"),
    "les_miserables": (nx.les_miserables_graph, "Les Misérables co-appearances, networkx"),
    "florentine_families": (nx.florentine_families_graph, "Florentine families, networkx"),
    "davis_southern_women": (nx.davis_southern_women_graph,
                             "Davis Southern Women, women x events, networkx"),
}


def real_graph(name: str, features: int | None = None, density: float = 0.1,
               seed: int = 0) -> GraphDataset:
    """A graph shipped with networkx (:data:`REAL_GRAPHS`).  Features: the identity (one-hot
    node ids, as in Kipf & Welling's karate example) or, with ``features``, seeded random
    binary features of that width."""
    make, source = REAL_GRAPHS[name]
    a = _from_nx(make())
    n = a.shape[0]
    x = np.eye(n) if features is None else random_features(n, features, density, seed)
    return GraphDataset(name, a, x, source=source)


def karate(features: int | None = None, density: float = 0.1, seed: int = 0) -> GraphDataset:
    """Zachary's karate club (34 nodes, 78 edges, shipped with networkx)."""
    return real_graph("karate", features, density, seed)


def digits(batch: int | None = None, offset: int = 0) -> np.ndarray:
    """scikit-learn's handwritten digits (1,797 images of 8 x 8 pixels, UCI optdigits), scaled
    to [0, 1] (about half the pixels are zero): ``batch`` images from ``offset``, each a row of
    64 values."""
    try:  # deferred: scikit-learn comes with the torch extra, the only user (the SAE)
        from sklearn.datasets import load_digits
    except ImportError:
        raise ValueError("the digits images ship with scikit-learn: pip install -e '.[torch]'") from None
    images = load_digits().data / 16.0
    end = len(images) if batch is None else offset + batch
    if not 0 <= offset < end <= len(images):
        raise ValueError(f"digits: {len(images)} images; asked for {batch} from {offset}")
    return np.ascontiguousarray(images[offset:end], dtype=np.float64)


# ----------------------------------------------------------------------------- generic synthetic
def uniform_random(n: int, avg_degree: float, features: int, feature_density: float = 0.05,
                   seed: int = 0) -> GraphDataset:
    """Erdős–Rényi graph with the given average degree."""
    if n < 2:
        raise ValueError(f"uniform_random: need at least 2 nodes, got {n}")
    p = min(1.0, avg_degree / (n - 1))
    a = _from_nx(nx.fast_gnp_random_graph(n, p, seed=seed))
    return GraphDataset(f"uniform{n}", a, random_features(n, features, feature_density, seed + 1),
                        synthetic=True, source="synthetic, Erdős–Rényi")


def power_law(n: int, m: int, features: int, feature_density: float = 0.05,
              seed: int = 0) -> GraphDataset:
    """Barabási–Albert preferential attachment (``m`` edges per new node): power-law degrees."""
    if not 1 <= m < n:
        raise ValueError(f"power_law: need 1 <= m < n, got m={m}, n={n}")
    a = _from_nx(nx.barabasi_albert_graph(n, m, seed=seed))
    return GraphDataset(f"powerlaw{n}", a, random_features(n, features, feature_density, seed + 1),
                        synthetic=True, source="synthetic, Barabási–Albert")


def block_diagonal(n: int, blocks: int, density: float, features: int,
                   feature_density: float = 0.05, seed: int = 0) -> GraphDataset:
    """``blocks`` dense-ish communities on the diagonal (edge probability ``density`` inside a
    block, none between blocks)."""
    if not 1 <= blocks <= n:
        raise ValueError(f"block_diagonal: need 1 <= blocks <= n, got blocks={blocks}, n={n}")
    rng = np.random.default_rng(seed)
    parts = []
    bounds = np.linspace(0, n, blocks + 1).astype(int)
    for lo, hi in itertools.pairwise(bounds):
        blk = sp.random_array((hi - lo, hi - lo), density=density, rng=rng, format="coo")
        upper = blk.row < blk.col  # edge probability ``density`` per pair, then symmetrised
        parts.append((blk.row[upper] + lo, blk.col[upper] + lo))
    rows = np.concatenate([r for r, _ in parts]) if parts else np.zeros(0, int)
    cols = np.concatenate([c for _, c in parts]) if parts else np.zeros(0, int)
    a = _csr(sp.coo_array((np.ones(len(rows)), (rows, cols)), shape=(n, n)))
    return GraphDataset(f"blockdiag{n}", a, random_features(n, features, feature_density, seed + 1),
                        synthetic=True, source="synthetic, block diagonal")


SYNTHETIC = ("uniform", "powerlaw", "blockdiag")


def _exact_pairs(n: int, m: int, rng: np.random.Generator, *, weights: np.ndarray | None = None,
                 bounds: np.ndarray | None = None, what: str = "graph") -> tuple[np.ndarray, np.ndarray]:
    """``m`` distinct unordered pairs ``i < j`` of ``n`` nodes: both ends drawn in proportion to
    ``weights`` (uniform without), the second inside the first's block when ``bounds`` (block
    edges) are given; drawn in rounds until exactly ``m`` distinct pairs exist."""
    p = None if weights is None else weights / weights.sum()
    keys = np.zeros(0, dtype=np.int64)
    for _ in range(10_000):
        if len(keys) >= m:
            break
        need = m - len(keys)
        k = 2 * need + 64
        a = rng.choice(n, size=k, p=p) if p is not None else rng.integers(0, n, size=k)
        if bounds is None:
            b = rng.choice(n, size=k, p=p) if p is not None else rng.integers(0, n, size=k)
        else:
            blk = np.searchsorted(bounds, a, side="right") - 1
            lo, hi = bounds[blk], bounds[blk + 1]
            b = lo + (rng.random(k) * (hi - lo)).astype(np.int64)
        ok = a != b
        new = np.unique(np.minimum(a, b)[ok].astype(np.int64) * n + np.maximum(a, b)[ok])
        new = np.setdiff1d(new, keys, assume_unique=True)
        keys = np.union1d(keys, rng.permutation(new)[:need])
    else:  # pragma: no cover - only a near-complete graph with skewed weights gets here
        raise ValueError(f"{what}: could not draw {m} distinct edges on {n} nodes")
    return keys // n, keys % n


def synthetic_graph(pattern: str, n: int, density: float, features: int = 16,
                    feature_density: float = 0.05, seed: int = 0,
                    blocks: int | None = None) -> GraphDataset:
    """A seeded generic graph whose adjacency has exactly ``round(density * n * n / 2)``
    undirected edges, so its non-zero fraction ``nnz / (n * n)`` is ``density`` to within
    ``2 / n**2`` (no self loops: at most ``(n - 1) / n``).  ``pattern``:

    * ``uniform``: every pair equally likely (Erdős–Rényi G(n, m));
    * ``powerlaw``: Chung–Lu, both ends in proportion to power-law weights
      ``(i + 1)^(-2/3)`` (degree exponent 2.5), expected degrees clipped at ``n - 1``, node ids
      shuffled;
    * ``blockdiag``: edges only inside ``blocks`` equal diagonal blocks (default ``n // 32``,
      fewer where the blocks cannot hold the edges: at density ``d`` at most about ``1 / d``
      blocks), uniform inside them.

    Features: seeded random binary at ``feature_density`` (at least one per row)."""
    if pattern not in SYNTHETIC:
        raise ValueError(f"synthetic graph: unknown pattern {pattern!r}; use one of {', '.join(SYNTHETIC)}")
    if n < 2:
        raise ValueError(f"{pattern}: need at least 2 nodes, got {n}")
    if not 0.0 < density <= (n - 1) / n:
        raise ValueError(f"{pattern}: adjacency density {density:g} must be above 0 and at most "
                         f"(n - 1) / n = {(n - 1) / n:.4g} (no self loops) on {n} nodes")
    m = round(density * n * n / 2)
    if m < 1:
        raise ValueError(f"{pattern}: adjacency density {density:g} is less than one edge on {n} nodes")
    rng = np.random.default_rng(seed)
    bounds = None
    if pattern == "uniform":
        r, c = _exact_pairs(n, m, rng, what=pattern)
        source = f"synthetic, Erdős–Rényi G(n, m), {m} edges"
    elif pattern == "powerlaw":
        w = (np.arange(n) + 1.0) ** (-2.0 / 3.0)
        for _ in range(50):  # expected degrees 2m * w / sum(w), clipped at n - 1
            w = np.minimum(w * 2 * m / w.sum(), n - 1)
        perm = rng.permutation(n)
        r, c = _exact_pairs(n, m, rng, weights=w, what=pattern)
        r, c = perm[r], perm[c]
        source = f"synthetic, Chung–Lu power-law degrees, {m} edges"
    else:
        b = max(1, min(n, blocks or n // 32))

        def capacity(k: int) -> int:
            s = np.diff(np.linspace(0, n, k + 1).astype(int))
            return int((s * (s - 1) // 2).sum())

        while b > 1 and capacity(b) < m:
            b -= 1
        bounds = np.linspace(0, n, b + 1).astype(np.int64)
        r, c = _exact_pairs(n, m, rng, bounds=bounds, what=pattern)
        source = f"synthetic, block diagonal, {b} blocks, {m} edges"
    a = _csr(sp.coo_array((np.ones(len(r)), (r, c)), shape=(n, n)))
    return GraphDataset(f"{pattern}{n}_d{density:g}", a,
                        random_features(n, features, feature_density, seed + 1),
                        synthetic=True, source=f"{source}, adjacency density {a.nnz / n**2:.4g}")


# ----------------------------------------------------------------------------- matched synthetic
@dataclass(frozen=True)
class Matched:
    """The published size of a dataset a synthetic stand-in copies."""

    title: str
    nodes: int
    edges: int  # undirected, no self loops
    features: int
    feature_density: float
    feature_kind: str  # "binary" | "tfidf" | "dense"
    max_degree: int | None = None  # the published maximum degree, where known
    gamma: float = 2.5  # power-law exponent of the degree weights


MATCHED = {
    "cora": Matched("Cora", 2708, 5278, 1433, 0.0127, "binary", 168),
    "citeseer": Matched("CiteSeer", 3327, 4552, 3703, 0.0085, "binary", 99),
    "pubmed": Matched("PubMed", 19717, 44324, 500, 0.100, "tfidf", 171),
    "ogb_collab": Matched("OGB-Collab", 235868, 1285465, 128, 1.0, "dense"),
}


def _chung_lu(n: int, m: int, gamma: float, rng: np.random.Generator,
              max_degree: int | None = None) -> sp.csr_array:
    """``m`` distinct undirected edges on ``n`` nodes, every node with at least one: a random
    partner for each node first (drawn in proportion to the weights), then Chung–Lu pairs
    (both ends drawn in proportion to power-law weights ``(i + 1)^(-1/(gamma - 1))``, as
    expected degrees clipped at ``max_degree``) until ``m`` distinct edges exist; node ids
    shuffled."""
    if not n - 1 <= m <= n * (n - 1) // 2:
        raise ValueError(f"synthetic graph: {m} edges on {n} nodes cannot be connected and simple")
    w = (np.arange(n) + 1.0) ** (-1.0 / (gamma - 1.0))
    w *= 2 * m / w.sum()
    for _ in range(20 if max_degree else 0):  # clip the hubs, give the excess to the rest
        w = np.minimum(w, max_degree)
        w *= 2 * m / w.sum()
    p = w / w.sum()
    u = np.arange(n)
    v = rng.choice(n, size=n, p=p)
    clash = u == v
    v[clash] = (v[clash] + 1 + rng.integers(0, n - 1, size=int(clash.sum()))) % n
    keys = np.unique(np.minimum(u, v) * n + np.maximum(u, v))
    if len(keys) > m:  # every node already has an edge: keep them all only if m allows
        keys = rng.choice(keys, size=m, replace=False)
    while len(keys) < m:
        k = int(1.1 * (m - len(keys))) + 16
        a, b = rng.choice(n, size=k, p=p), rng.choice(n, size=k, p=p)
        ok = a != b
        new = np.setdiff1d(np.minimum(a, b)[ok] * n + np.maximum(a, b)[ok], keys)
        new = rng.permutation(np.unique(new))[: m - len(keys)]
        keys = np.union1d(keys, new)
    perm = rng.permutation(n)
    r, c = perm[keys // n], perm[keys % n]
    return _csr(sp.coo_array((np.ones(len(r)), (r, c)), shape=(n, n)))


def _matched_features(spec: Matched, features: int, rng: np.random.Generator) -> np.ndarray:
    n = spec.nodes
    if spec.feature_kind == "dense":
        return rng.standard_normal((n, features))
    x = (rng.random((n, features)) < spec.feature_density).astype(np.float64)
    empty = ~x.any(axis=1)
    x[np.flatnonzero(empty), rng.integers(0, features, size=int(empty.sum()))] = 1.0
    if spec.feature_kind == "tfidf":
        x *= rng.exponential(0.05, size=x.shape)
    return x


def matched_synthetic(name: str, features: int | None = None, seed: int = 0) -> GraphDataset:
    """A synthetic graph with the size of the named dataset (:data:`MATCHED`): its node count,
    undirected edge count and feature width (``features`` overrides the width) and density; a
    power-law degree distribution at its mean degree.  Labelled synthetic."""
    spec = MATCHED[name]
    rng = np.random.default_rng(seed)
    a = _chung_lu(spec.nodes, spec.edges, spec.gamma, rng, spec.max_degree)
    f = features or spec.features
    label = name if f == spec.features else f"{name}_f{f}"
    return GraphDataset(label, a, _matched_features(spec, f, rng), synthetic=True,
                        source=f"synthetic with {spec.title}'s size: {spec.nodes} nodes, "
                               f"{spec.edges} edges, power-law degrees; not {spec.title}'s edges")


def cora_like(features: int = 1433, seed: int = 0) -> GraphDataset:
    """The Cora-sized synthetic graph (:func:`matched_synthetic` ``"cora"``)."""
    return matched_synthetic("cora", features, seed)


# ----------------------------------------------------------------------------- user files
class _PlanetoidUnpickler(pickle.Unpickler):
    """Planetoid files are Python pickles: only the classes they hold may be loaded (scipy
    sparse matrices, numpy arrays, lists and dicts), not arbitrary code."""

    def find_class(self, module: str, name: str):
        if (module, name) == ("_codecs", "encode") or module.split(".")[0] in ("collections", "builtins", "__builtin__", "copy_reg", "copyreg", "numpy") or \
                module.startswith("scipy.sparse"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a Planetoid file")


def _unpickle(path: Path):
    with path.open("rb") as fh:
        return _PlanetoidUnpickler(fh, encoding="latin1").load()


def _read_planetoid(d: Path) -> tuple[str, sp.csr_array, np.ndarray | None]:
    graphs = sorted(d.glob("ind.*.graph"))
    name = graphs[0].name.split(".")[1]
    f = {k: d / f"ind.{name}.{k}" for k in ("graph", "allx", "tx", "test.index")}
    try:
        adj_lists = _unpickle(f["graph"])
        n = max(max(adj_lists, default=-1), max((max(v, default=-1) for v in adj_lists.values()),
                                                default=-1)) + 1
        r = np.repeat(np.fromiter(adj_lists, dtype=np.int64, count=len(adj_lists)),
                      [len(v) for v in adj_lists.values()])
        c = np.fromiter(itertools.chain.from_iterable(adj_lists.values()), dtype=np.int64)
        a = _csr(sp.coo_array((np.ones(len(r)), (r, c)), shape=(n, n)))
        x = None
        if f["allx"].exists() and f["tx"].exists() and f["test.index"].exists():
            allx, tx = sp.csr_array(_unpickle(f["allx"])), sp.csr_array(_unpickle(f["tx"]))
            test = np.loadtxt(f["test.index"], dtype=np.int64, ndmin=1)
            xs = sp.lil_array((n, allx.shape[1]))
            xs[: allx.shape[0]] = allx
            xs[test] = tx[: len(test)]  # the test rows are stored in test.index order
            x = xs.toarray()
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError, ValueError,
            IndexError) as exc:
        raise ValueError(f"Planetoid directory {str(d)!r} ({name}): cannot read its files: {exc}") from None
    return name, a, x


def _read_csv_gz(path: Path, dtype) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return np.loadtxt(fh, delimiter=",", dtype=dtype, ndmin=2)


def _read_ogb(d: Path) -> tuple[str, sp.csr_array, np.ndarray | None]:
    raw = d / "raw" if (d / "raw").is_dir() else d
    try:
        e = _read_csv_gz(raw / "edge.csv.gz", np.int64)
        if e.shape[1] != 2:
            raise ValueError(f"edge.csv.gz has {e.shape[1]} columns, expected 2 (source, target)")
        counts = raw / "num-node-list.csv.gz"
        n = int(_read_csv_gz(counts, np.int64).sum()) if counts.exists() else int(e.max(initial=-1)) + 1
        if e.size and (e.min() < 0 or e.max() >= n):
            raise ValueError(f"edge.csv.gz names node {int(e.max())}, but the graph has {n} nodes")
        feat = raw / "node-feat.csv.gz"
        x = _read_csv_gz(feat, np.float64) if feat.exists() else None
        if x is not None and x.shape[0] != n:
            raise ValueError(f"node-feat.csv.gz has {x.shape[0]} rows for {n} nodes")
    except (OSError, EOFError, ValueError) as exc:
        raise ValueError(f"OGB directory {str(d)!r}: {exc}") from None
    a = _csr(sp.coo_array((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)))
    return d.name, a, x


def read_matrix(p: str | Path) -> sp.csr_array:
    """A matrix from a Matrix Market ``.mtx`` (``scipy.io.mmread``) or scipy sparse ``.npz``
    file (``scipy.sparse.load_npz``), as a CSR array; an unreadable file is a ``ValueError``
    naming it."""
    p = Path(p)
    kind = "Matrix Market" if p.suffix == ".mtx" else "scipy sparse .npz"
    try:
        _check_matrix_size(p, *_declared_size(p))
        if p.suffix == ".mtx":
            m = scipy.io.mmread(p)
            _check_skew_diagonal(p, m)
        else:
            m = sp.load_npz(p)
        if np.asarray(m.data if sp.issparse(m) else m).dtype.kind == "c":
            raise MatrixFileError(f"file {str(p)!r}: the matrix holds complex values; the datapath takes "
                                 "real numbers")
        if not sp.issparse(m):
            m = sp.csr_array(np.asarray(m))
        m = sp.csr_array(m)
        m.check_format(full_check=True)  # indptr monotonic, indices in range
    except (OSError, EOFError, ValueError, IndexError, KeyError, TypeError) as exc:
        if isinstance(exc, MatrixFileError):
            raise
        raise ValueError(f"file {str(p)!r}: not a readable {kind} matrix: {exc}") from None
    return m


def _check_skew_diagonal(p: Path, m) -> None:
    """A skew-symmetric Matrix Market file has no diagonal entries (its diagonal is zero by
    definition); one that lists some is not a legal file."""
    if scipy.io.mminfo(p)[5] != "skew-symmetric":
        return
    coo = sp.coo_array(m) if sp.issparse(m) else sp.coo_array(np.asarray(m))
    on = np.flatnonzero(coo.row == coo.col) if sp.issparse(m) else np.flatnonzero(np.diagonal(np.asarray(m)))
    if on.size:
        k = int(coo.row[on[0]]) if sp.issparse(m) else int(on[0])
        raise MatrixFileError(f"file {str(p)!r}: skew-symmetric, but it has the diagonal entry ({k + 1}, {k + 1}) "
                             "(a skew-symmetric matrix's diagonal is zero and not stored)")


# a matrix file's declared size is checked before anything is allocated: rows / columns above
# this, or index arrays above the machine's memory, are refused
MAX_FILE_DIM = 1 << 24


class MatrixFileError(ValueError):
    """A matrix file that reads but is not a legal or usable matrix (the message names it)."""


class MatrixTooLarge(MatrixFileError):
    """A matrix file declares a size the run could not hold."""


def _declared_size(p: Path) -> tuple[int, int, int]:
    """(rows, columns, stored entries) as the file's header says, read without the entries."""
    if p.suffix == ".mtx":
        rows, cols, entries, *_ = scipy.io.mminfo(p)
        return int(rows), int(cols), int(entries)
    with np.load(p, allow_pickle=False) as z:
        if "shape" not in z.files:
            raise ValueError("no 'shape' array (not written by scipy.sparse.save_npz)")
        shape = tuple(int(v) for v in np.asarray(z["shape"]).ravel())
        entries = int(z["data"].shape[0]) if "data" in z.files else 0
    if len(shape) != 2:
        raise ValueError(f"shape {shape} is not a matrix's")
    return shape[0], shape[1], entries


def _check_matrix_size(p: Path, rows: int, cols: int, entries: int) -> None:
    if min(rows, cols) < 1 or entries < 0:
        raise MatrixTooLarge(f"file {str(p)!r}: declares a {rows}x{cols} matrix with {entries} entries")
    if max(rows, cols) > MAX_FILE_DIM:
        raise MatrixTooLarge(f"file {str(p)!r}: a {rows}x{cols} matrix; at most {MAX_FILE_DIM:,} rows and "
                             "columns (the formats' index arrays and the dense operands grow with them)")
    need = 8 * (rows + cols + 2) + 24 * entries  # CSR index arrays and values, a COO copy while reading
    have = _physical_memory()
    if have and need > have // 2:
        raise MatrixTooLarge(f"file {str(p)!r}: a {rows}x{cols} matrix with {entries:,} entries needs about "
                             f"{need / 2**30:.1f} GiB to read, more than half this machine's memory")


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on this platform: no check beyond the dims
        return None


def load_graph_file(path: str | Path, features: int = 16, feature_density: float = 0.05,
                    seed: int = 0) -> GraphDataset:
    """A graph from a Matrix Market ``.mtx`` or scipy sparse ``.npz`` adjacency file, a
    Planetoid directory or an OGB dataset directory; non-zeros become edges (symmetrised, self
    loops removed); features are the directory's own or seeded random."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"graph file {str(p)!r} does not exist")
    x = None
    if p.is_dir():
        if any(p.glob("ind.*.graph")):
            name, a, x = _read_planetoid(p)
        elif (p / "raw" / "edge.csv.gz").exists() or (p / "edge.csv.gz").exists():
            name, a, x = _read_ogb(p)
        else:
            raise ValueError(f"graph directory {str(p)!r}: neither a Planetoid directory "
                             "(ind.<name>.graph) nor an OGB dataset (raw/edge.csv.gz)")
    elif p.suffix in (".mtx", ".npz"):
        name, m = p.stem, read_matrix(p)
        if m.shape[0] != m.shape[1]:
            raise ValueError(f"graph file {str(p)!r}: adjacency must be square, got {m.shape}")
        a = _csr(m)
    else:
        raise ValueError(f"graph file {str(p)!r}: expected a .mtx (Matrix Market) or .npz (scipy "
                         "sparse) file, or a Planetoid / OGB directory")
    if x is None:
        x = random_features(a.shape[0], features, feature_density, seed)
    return GraphDataset(name, a, x, source=f"from {p}")


DATASETS = (*REAL_GRAPHS, *MATCHED, "cora_small", "uniform", "powerlaw", "blockdiag")


def load_dataset(name: str, *, nodes: int = 256, features: int | None = None,
                 density: float | None = None, feature_density: float | None = None,
                 seed: int = 0) -> GraphDataset:
    """By name (``DATASETS``) or a path to a ``.mtx`` / ``.npz`` file or a Planetoid / OGB
    directory.  ``nodes``, ``features`` apply where they make sense; ``density`` (adjacency
    non-zero fraction ``nnz / (n * n)``, no self loops: :func:`synthetic_graph`) and
    ``feature_density`` (default 0.05) apply to the generic synthetic graphs ``uniform``,
    ``powerlaw`` and ``blockdiag`` only (a ``ValueError`` elsewhere).  Without ``density`` these
    are the older generators at about 2 % (Erdős–Rényi G(n, p = 0.02), Barabási–Albert with
    ``m = round(0.01 n)``, ``n // 32`` blocks), unchanged."""
    if (density is not None or feature_density is not None) and name not in SYNTHETIC:
        what = " and ".join(k for k, v in (("density", density), ("feature density", feature_density))
                            if v is not None)
        raise ValueError(f"dataset {name}: a {what} applies to the synthetic graphs "
                         f"{', '.join(SYNTHETIC)} only")
    if name in REAL_GRAPHS:
        return real_graph(name, features, seed=seed)
    if name in MATCHED:
        return matched_synthetic(name, features, seed)
    if name == "cora_small":
        return cora_like(features or 32, seed)
    f = features or 16
    fd = 0.05 if feature_density is None else feature_density
    if name in SYNTHETIC and density is not None:
        return synthetic_graph(name, nodes, density, f, fd, seed=seed)
    d = 0.02  # the older generators' default
    if name == "uniform":
        return uniform_random(nodes, d * (nodes - 1), f, fd, seed=seed)
    if name == "powerlaw":
        return power_law(nodes, max(1, round(d * nodes / 2)), f, fd, seed=seed)
    if name == "blockdiag":
        return block_diagonal(nodes, max(1, nodes // 32), min(1.0, d * max(1, nodes // 32)), f, fd, seed=seed)
    if name.endswith((".mtx", ".npz")) or Path(name).is_dir():
        return load_graph_file(name, f, seed=seed)
    raise ValueError(f"unknown dataset {name!r}: use one of {', '.join(DATASETS)}, a .mtx/.npz "
                     "file or a Planetoid/OGB directory")


def bigbird_mask(seq: int, block: int, random_blocks: int = 1, window: int = 3,
                 global_blocks: int = 1, seed: int = 0) -> np.ndarray:
    """BigBird block-sparse keep-mask (``seq`` x ``seq`` bool): a sliding window of ``window``
    blocks around the diagonal, ``global_blocks`` global block rows/columns, and
    ``random_blocks`` random blocks per block row."""
    if seq % block:
        raise ValueError(f"bigbird_mask: sequence {seq} is not a multiple of the block size {block}")
    nb = seq // block
    rng = np.random.default_rng(seed)
    blocks = np.zeros((nb, nb), dtype=bool)
    half = window // 2
    for i in range(nb):
        blocks[i, max(0, i - half): i + half + 1] = True
        free = np.flatnonzero(~blocks[i])
        if free.size and random_blocks:
            blocks[i, rng.choice(free, size=min(random_blocks, free.size), replace=False)] = True
    blocks[:global_blocks, :] = True
    blocks[:, :global_blocks] = True
    return np.kron(blocks, np.ones((block, block), dtype=bool)).astype(bool)
