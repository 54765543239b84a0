"""Graph and feature data for the model zoo: KarateClub, synthetic graphs, user files.

Nothing is downloaded.  KarateClub comes with networkx; synthetic graphs are seeded (uniform
random, power law, block diagonal, and a Cora-shaped 2708-node / 1433-feature graph); user
graphs load from Matrix Market (``.mtx``) or scipy ``.npz`` files (scipy is needed only for
``.npz``).  Adjacencies are dense numpy arrays: the largest graph here (Cora-shaped) is
2708 x 2708, small enough, and the compiler's ``TensorData.from_dense`` takes dense arrays.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

__all__ = [
    "DATASETS",
    "GraphDataset",
    "bigbird_mask",
    "block_diagonal",
    "cora_like",
    "gcn_normalize",
    "karate",
    "load_dataset",
    "load_graph_file",
    "mean_normalize",
    "power_law",
    "random_features",
    "uniform_random",
]


@dataclass
class GraphDataset:
    """An undirected graph (0/1 adjacency, no self loops) with a node feature matrix."""

    name: str
    adjacency: np.ndarray  # (n, n) float64, symmetric 0/1
    features: np.ndarray  # (n, f) float64

    @property
    def num_nodes(self) -> int:
        return int(self.adjacency.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_edges(self) -> int:
        return int(np.count_nonzero(self.adjacency))

    def describe(self) -> str:
        a_d = self.num_edges / self.num_nodes**2
        x_d = np.count_nonzero(self.features) / self.features.size
        return (f"{self.name}: {self.num_nodes} nodes, {self.num_edges} directed edges "
                f"(adjacency {100 * (1 - a_d):.2f}% sparse), {self.num_features} features "
                f"({100 * (1 - x_d):.2f}% sparse)")


def gcn_normalize(adj: np.ndarray) -> np.ndarray:
    """Kipf & Welling: ``D^-1/2 (A + I) D^-1/2``."""
    a = adj + np.eye(adj.shape[0])
    d = 1.0 / np.sqrt(a.sum(axis=1))
    return a * d[:, None] * d[None, :]


def mean_normalize(adj: np.ndarray) -> np.ndarray:
    """GraphSAGE mean aggregation: ``D^-1 A`` (isolated nodes keep an all-zero row)."""
    deg = adj.sum(axis=1)
    inv = np.divide(1.0, deg, out=np.zeros_like(deg, dtype=np.float64), where=deg > 0)
    return adj * inv[:, None]


def random_features(n: int, f: int, density: float, seed: int) -> np.ndarray:
    """Binary bag-of-words style features with about ``density`` non-zeros (at least one per row)."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"feature density {density} must be in (0, 1]")
    rng = np.random.default_rng(seed)
    x = (rng.random((n, f)) < density).astype(np.float64)
    empty = ~x.any(axis=1)
    x[np.flatnonzero(empty), rng.integers(0, f, size=int(empty.sum()))] = 1.0
    return x


def _from_nx(g) -> np.ndarray:
    a = nx.to_numpy_array(g, nodelist=sorted(g.nodes()), weight=None, dtype=np.float64)
    np.fill_diagonal(a, 0.0)
    return np.minimum(a + a.T, 1.0)


def karate(features: int | None = None, density: float = 0.1, seed: int = 0) -> GraphDataset:
    """Zachary's karate club (34 nodes, 78 edges, shipped with networkx).  Features: the
    identity (one-hot node ids, as in Kipf & Welling's karate example) or, with ``features``,
    seeded random binary features of that width."""
    a = _from_nx(nx.karate_club_graph())
    x = np.eye(a.shape[0]) if features is None else random_features(a.shape[0], features, density, seed)
    return GraphDataset("karate", a, x)


def uniform_random(n: int, avg_degree: float, features: int, feature_density: float = 0.05,
                   seed: int = 0) -> GraphDataset:
    """Erdős–Rényi graph with the given average degree."""
    if n < 2:
        raise ValueError(f"uniform_random: need at least 2 nodes, got {n}")
    p = min(1.0, avg_degree / (n - 1))
    a = _from_nx(nx.fast_gnp_random_graph(n, p, seed=seed))
    return GraphDataset(f"uniform{n}", a, random_features(n, features, feature_density, seed + 1))


def power_law(n: int, m: int, features: int, feature_density: float = 0.05,
              seed: int = 0) -> GraphDataset:
    """Barabási–Albert preferential attachment (``m`` edges per new node): power-law degrees."""
    if not 1 <= m < n:
        raise ValueError(f"power_law: need 1 <= m < n, got m={m}, n={n}")
    a = _from_nx(nx.barabasi_albert_graph(n, m, seed=seed))
    return GraphDataset(f"powerlaw{n}", a, random_features(n, features, feature_density, seed + 1))


def block_diagonal(n: int, blocks: int, density: float, features: int,
                   feature_density: float = 0.05, seed: int = 0) -> GraphDataset:
    """``blocks`` dense-ish communities on the diagonal (edge probability ``density`` inside a
    block, none between blocks)."""
    if not 1 <= blocks <= n:
        raise ValueError(f"block_diagonal: need 1 <= blocks <= n, got blocks={blocks}, n={n}")
    rng = np.random.default_rng(seed)
    a = np.zeros((n, n))
    bounds = np.linspace(0, n, blocks + 1).astype(int)
    for lo, hi in itertools.pairwise(bounds):
        blk = (rng.random((hi - lo, hi - lo)) < density).astype(np.float64)
        a[lo:hi, lo:hi] = np.triu(blk, 1)
    a = np.minimum(a + a.T, 1.0)
    return GraphDataset(f"blockdiag{n}", a, random_features(n, features, feature_density, seed + 1))


def cora_like(features: int = 1433, seed: int = 0) -> GraphDataset:
    """Cora-shaped synthetic graph: 2708 nodes, power-law degrees (≈5400 undirected edges,
    Cora has 5278), binary features at Cora's density (1.27 %, 99.7 %+ sparse adjacency)."""
    g = power_law(2708, 2, features, 0.0127, seed)
    g.name = "cora_like" if features == 1433 else f"cora_like_f{features}"
    return g


def _read_mtx(path: Path) -> np.ndarray:
    """Matrix Market coordinate / array files (real, integer, pattern; general or symmetric)."""
    with path.open() as fh:
        header = fh.readline().lower().split()
        if len(header) < 5 or header[0] != "%%matrixmarket" or header[1] != "matrix":
            raise ValueError(f"{path}: not a Matrix Market matrix file (header {' '.join(header)!r})")
        layout, field_, symmetry = header[2], header[3], header[4]
        if field_ not in ("real", "integer", "pattern") or symmetry not in ("general", "symmetric"):
            raise ValueError(f"{path}: unsupported Matrix Market field/symmetry {field_}/{symmetry} "
                             "(supported: real, integer, pattern; general, symmetric)")
        line = fh.readline()
        while line.startswith("%"):
            line = fh.readline()
        dims = [int(t) for t in line.split()]
        body = np.loadtxt(fh, ndmin=2) if layout == "coordinate" else np.loadtxt(fh, ndmin=1)
    if layout == "array":
        return np.asarray(body, dtype=np.float64).reshape(dims[1], dims[0]).T.copy()
    n_rows, n_cols = dims[0], dims[1]
    out = np.zeros((n_rows, n_cols))
    if body.size:
        r = body[:, 0].astype(int) - 1
        c = body[:, 1].astype(int) - 1
        v = np.ones(len(r)) if field_ == "pattern" else body[:, 2]
        out[r, c] = v
        if symmetry == "symmetric":
            out[c, r] = v
    return out


def _read_npz(path: Path) -> np.ndarray:
    try:  # deferred: scipy is optional (extras dev / torch) and only .npz files need it
        import scipy.sparse as sp
    except ImportError:
        raise ValueError(f"{path}: reading scipy .npz files needs scipy (pip install scipy)") from None
    return np.asarray(sp.load_npz(path).toarray(), dtype=np.float64)


def load_graph_file(path: str | Path, features: int = 16, feature_density: float = 0.05,
                    seed: int = 0) -> GraphDataset:
    """A graph from a Matrix Market ``.mtx`` or scipy sparse ``.npz`` adjacency file; non-zeros
    become edges (symmetrised, self loops removed); features are seeded random."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"graph file {str(p)!r} does not exist")
    if p.suffix == ".mtx":
        a = _read_mtx(p)
    elif p.suffix == ".npz":
        a = _read_npz(p)
    else:
        raise ValueError(f"graph file {str(p)!r}: expected a .mtx (Matrix Market) or .npz (scipy sparse) file")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"graph file {str(p)!r}: adjacency must be square, got {a.shape}")
    a = (a != 0).astype(np.float64)
    np.fill_diagonal(a, 0.0)
    a = np.minimum(a + a.T, 1.0)
    return GraphDataset(p.stem, a, random_features(a.shape[0], features, feature_density, seed))


DATASETS = ("karate", "cora", "cora_small", "uniform", "powerlaw", "blockdiag")


def load_dataset(name: str, *, nodes: int = 256, features: int | None = None,
                 density: float = 0.02, seed: int = 0) -> GraphDataset:
    """By name (``DATASETS``) or a path to a ``.mtx`` / ``.npz`` file.  ``nodes``, ``features``
    and ``density`` (edge density of the synthetic graphs) apply where they make sense."""
    if name == "karate":
        return karate(features, seed=seed)
    if name == "cora":
        return cora_like(features or 1433, seed)
    if name == "cora_small":
        return cora_like(features or 32, seed)
    f = features or 16
    if name == "uniform":
        return uniform_random(nodes, density * (nodes - 1), f, seed=seed)
    if name == "powerlaw":
        return power_law(nodes, max(1, round(density * nodes / 2)), f, seed=seed)
    if name == "blockdiag":
        return block_diagonal(nodes, max(1, nodes // 32), min(1.0, density * max(1, nodes // 32)), f, seed=seed)
    if name.endswith((".mtx", ".npz")):
        return load_graph_file(name, f, seed=seed)
    raise ValueError(f"unknown dataset {name!r}: use one of {', '.join(DATASETS)} or a .mtx/.npz path")


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
