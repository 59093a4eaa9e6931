"""The prepare stage: from verified raw files to one file per party.

``prepare_dataset`` reads a dataset's raw files (or generates a synthetic one), builds each party's own table
as that party would hold it (its own id column and row order, a few ids the others lack), aligns the
entities by id (a private set intersection by default, :mod:`ppml.data.align`), splits training from test
rows, normalizes as the dataset's paper does (:mod:`ppml.data.normalize`) and writes

- ``<party>.npz`` for every party (:func:`ppml.io.save_party`): vertical data, the party's own columns of
  the aligned training and test rows, labels only for the label holder; horizontal data, the agent's own
  training rows with their labels;
- ``evaluator.npz`` (horizontal data only): the held-out test rows;
- ``manifest.json``: columns per party, the label holder, rows before and after alignment, ids dropped,
  alignment traffic, normalization, split sizes, the seed and the dataset's parameters.

The output is a function of the raw bytes, the parameters and the seed alone (the PSI keys are random, but
the intersection and the message sizes are not), and is written to a temporary directory that replaces
the output directory only when complete.

Readers, one per source format (``datasets.<key>.reader``); file names follow the dataset key as in
:mod:`ppml.data.sources` (or the registry key ``datasets.<key>.files_of`` names, for another split of the same
files):

- ``libsvm``: ``<key>`` and ``<key>.t`` (a9a / a9a.t), sparse; the second file is the test set.
- ``nips2003``: ``<key>_{train,valid}.{data,labels}`` (GISETTE, MADELON, ARCENE); validation = test set.
- ``adult``: ``adult.data`` and ``adult.test`` pooled; records with a missing value dropped; the six
  numeric attributes kept and the eight categorical ones one-hot encoded (``workclass=Private``, ...),
  with levels taken from the pooled complete records: the attribute domains are public (adult.names),
  so this leaks nothing about any agent's rows. 45222 records, 104 columns.
- ``fate_hetero``: FATE's ``fate/<key>_hetero_guest.csv`` (``id, y, x0..``) and
  ``fate/<key>_hetero_host.csv`` (``id, x0..``), joined by id into one table and dealt out again like
  every other dataset; the split must be FATE's (guest columns, host columns), or divide a file's columns
  among consecutive parties (Credit 1 to a guest and two hosts: 13, 5, 5). Values are kept as FATE
  distributes them (z-scored over all rows).
- ``give_credit``: ``cs-training.csv`` turned into FATE's give_credit features by FATE's recipe (the FATE
  hetero files themselves are not public): columns in FATE's order (guest: open credit lines, 90 days
  late, real-estate loans, 60-89 days past due, dependents; host: revolving utilization, age, 30-59 days
  past due, debt ratio, monthly income), missing values set to 0, z-scored with the mean and population
  standard deviation over all 150000 rows, rounded to 6 decimals. This reproduces all 30000 x 10 values
  of FATE's published ``give_credit_homo_test.csv`` (to float precision) and their labels.
- ``user_csv`` (``source: user``): the user's CSV file (``path``; copied by the download stage), read by
  :func:`ppml.data.readers.read_user_csv` and treated as Adult is: records with a missing value dropped,
  numeric columns kept, the others one-hot encoded with levels from the complete records. This is how the
  IPUMS US and Brazil extracts of [2]_, which may not be redistributed, come in.
- ``synthetic`` (``source: synthetic``): :func:`ppml.data.synthetic.logistic_dataset` with ``n`` rows and
  ``sum(split)`` columns.

References
----------
.. [1] Y. Hu, D. Niu, J. Yang, S. Zhou, "Learning Privately over Distributed Features: an ADMM Sharing
   Approach", AAAI 2020 (a9a split 66/57, gisette 2000/2000/1000).
.. [2] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (Adult: 35000 training rows over N agents; IPUMS US, Brazil).
.. [3] K. Yang, T. Fan, T. Chen, Y. Shi, Q. Yang, "A Quasi-Newton Method Based Vertical Federated
   Learning Framework for Logistic Regression", arXiv:1912.00513 (Credit 1 and Credit 2, FATE splits).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator, Literal, Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ppml.config import build, fail, flat_fields, section
from ppml.data import readers
from ppml.data.align import align
from ppml.data.download import USER_FILE, read_status
from ppml.data.normalize import HORIZONTAL, VERTICAL, ZSCORE_BOUND, NotZScoredError, collapse
from ppml.data.partition import Table, deal_rows, stratified_test_mask, vertical_holdings
from ppml.data.prepared import MANIFEST, DataUnavailable
from ppml.data.sources import DATASETS
from ppml.data.synthetic import logistic_dataset
from ppml.io import save_party, write_json
from ppml.network import Network
from ppml.parties import Party

__all__ = ["DatasetParams", "NormalizationError", "READERS", "dataset_params", "prepare_dataset",
           "check_normalized", "write_shard", "staging_dir", "remove_stale_staging"]

log = logging.getLogger(__name__)

EVALUATOR = "evaluator"
_PARTY_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: Where ``datasets.<key>.path`` of user data must lie: the download stage's DVC dependency.
USER_DIR = PurePosixPath("data/user")


# ---------------------------------------------------------------------------------------------------------
# readers: raw files -> Table


def _feature_names(d: int) -> tuple[str, ...]:
    """``f1`` ... ``f<d>``: the 1-based feature numbers of LIBSVM and the NIPS 2003 files."""
    return tuple(f"f{j}" for j in range(1, d + 1))


def _read_libsvm(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    d = sum(params.split)
    X_train, y_train = readers.read_libsvm(raw_dir / key, n_features=d)
    X_test, y_test = readers.read_libsvm(raw_dir / f"{key}.t", n_features=d)
    ids = np.concatenate([readers.row_ids("train", len(y_train)), readers.row_ids("test", len(y_test))])
    return Table(ids=ids, X=sp.vstack([X_train, X_test], format="csr"), columns=_feature_names(d),
                 y=np.concatenate([y_train, y_test]),
                 test=np.repeat([False, True], [len(y_train), len(y_test)]))


def _read_nips2003(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    d = sum(params.split)
    parts = ("train", "valid")
    X = {part: readers.read_dense_matrix(raw_dir / f"{key}_{part}.data", n_features=d) for part in parts}
    y = {part: readers.read_labels(raw_dir / f"{key}_{part}.labels") for part in parts}
    for part in X:
        if len(X[part]) != len(y[part]):
            raise readers.DataFormatError(raw_dir / f"{key}_{part}.labels", len(y[part]),
                                          f"{len(y[part])} labels for {len(X[part])} rows", "")
    return Table(ids=np.concatenate([readers.row_ids(part, len(y[part])) for part in X]),
                 X=np.vstack([X["train"], X["valid"]]), columns=_feature_names(d),
                 y=np.concatenate([y["train"], y["valid"]]),
                 test=np.repeat([False, True], [len(y["train"]), len(y["valid"])]))


def _read_adult(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    frames = {part: readers.read_adult(raw_dir / f"adult.{part}") for part in ("data", "test")}
    ids = np.concatenate([readers.row_ids(part, len(frame)) for part, frame in frames.items()])
    frame = pd.concat(frames.values(), ignore_index=True)
    categorical = [c for c in readers.ADULT_COLUMNS[:-1] if c not in readers.ADULT_NUMERIC]
    return _one_hot_table(ids, frame.drop(columns="income"), frame["income"].to_numpy(),
                          categorical=categorical)


def _read_user_csv(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    ids, features, y, counts = readers.read_user_csv(
        raw_dir / USER_FILE, label_column=params.label_column, positive_label=params.positive_label,
        id_column=params.id_column, negative_label=params.negative_label,
        other_labels=params.other_labels or "error", categorical=params.categorical or (),
        missing_values=readers.USER_MISSING if params.missing_values is None else params.missing_values)
    categorical = [c for c in features.columns if not pd.api.types.is_numeric_dtype(features[c])]
    table = _one_hot_table(ids, features, y, categorical=categorical)
    table.info["label_counts"] = counts
    return table


def _one_hot_table(ids: np.ndarray, features: pd.DataFrame, y: np.ndarray, *,
                   categorical: list[str]) -> Table:
    """The complete records, their other columns kept and the `categorical` ones one-hot encoded.

    Records with a missing value are dropped (and counted in ``info``). Levels (``workclass=Private``, ...)
    come from the complete records of all rows, training and test alike: the attribute domains are public
    (adult.names, the IPUMS codebooks), so this leaks nothing about any party's rows.
    """
    complete = features.notna().all(axis=1).to_numpy()
    if not complete.any():
        raise ValueError(f"all {len(ids)} records have a missing value")
    X = pd.get_dummies(features[complete], columns=categorical, prefix_sep="=", dtype=np.float64)
    log.info("%d of %d records dropped for a missing value; %d columns one-hot encoded",
             int((~complete).sum()), len(ids), len(categorical))
    return Table(ids=ids[complete], X=X.to_numpy(np.float64), columns=tuple(X.columns), y=y[complete],
                 info={"records": len(ids), "dropped_missing": int((~complete).sum()),
                       "one_hot": categorical})


def _read_fate_hetero(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    guest_path, host_path = (raw_dir / "fate" / f"{key}_hetero_{role}.csv" for role in ("guest", "host"))
    ids, guest, y = readers.read_csv_table(guest_path, id_column="id", label_column="y")
    host_ids, host, _ = readers.read_csv_table(host_path, id_column="id")
    position = pd.Index(host_ids).get_indexer(ids)
    if len(host_ids) != len(ids) or (position < 0).any():
        raise ValueError(f"{guest_path} and {host_path} must hold the same ids: {len(ids)} and "
                         f"{len(host_ids)} rows, {int((position < 0).sum())} guest ids missing from the host")
    return Table(ids=ids, X=np.hstack([guest.to_numpy(), host.to_numpy()[position]]),
                 columns=tuple(guest.columns) + tuple(host.columns), y=y,
                 blocks=(guest.shape[1], host.shape[1]))


#: FATE's give_credit column order: guest x0..x4, host x0..x4 (see the module docstring).
GIVE_CREDIT_FATE_COLUMNS = (
    ("NumberOfOpenCreditLinesAndLoans", "NumberOfTimes90DaysLate", "NumberRealEstateLoansOrLines",
     "NumberOfTime60-89DaysPastDueNotWorse", "NumberOfDependents"),
    ("RevolvingUtilizationOfUnsecuredLines", "age", "NumberOfTime30-59DaysPastDueNotWorse", "DebtRatio",
     "MonthlyIncome"),
)


def _read_give_credit(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    ids, features, y = readers.read_csv_table(raw_dir / "cs-training.csv", id_column="",
                                              label_column="SeriousDlqin2yrs", allow_missing=True)
    columns = GIVE_CREDIT_FATE_COLUMNS[0] + GIVE_CREDIT_FATE_COLUMNS[1]
    values = np.nan_to_num(features[list(columns)].to_numpy(), nan=0.0)
    values = np.round((values - values.mean(axis=0)) / values.std(axis=0), 6)
    return Table(ids=ids, X=values, columns=columns, y=y,
                 blocks=tuple(len(block) for block in GIVE_CREDIT_FATE_COLUMNS),
                 info={"recipe": "FATE: missing -> 0, z-score over all rows (population std), "
                                 "rounded to 6 decimals"})


def _generate(raw_dir: Path, *, key: str, params: DatasetParams, rng: np.random.Generator) -> Table:
    d = sum(params.split)
    ids, X, y = logistic_dataset(n=params.n, d=d, rng=rng)
    return Table(ids=ids, X=X, columns=_feature_names(d), y=y, info={"generator": "logistic_dataset"})


@dataclass(frozen=True)
class Reader:
    """How to get a dataset's :class:`Table`, and what the parameters must supply for it.

    Attributes
    ----------
    load : callable
        ``load(raw_dir, *, key, params, rng) -> Table``.
    own_test_rows : bool
        The source comes with its own test rows (then ``test_fraction`` must be omitted; else it is needed).
    width_from_split : bool
        The number of columns is ``sum(split)`` (files without a header), so the data must be vertical.
    sparse : bool
        The features come as a CSR matrix, which must stay sparse.
    """

    load: Callable[..., Table]
    own_test_rows: bool
    width_from_split: bool
    sparse: bool = False


#: Readers by ``datasets.<key>.reader``; ``synthetic`` serves ``source: synthetic``.
READERS: dict[str, Reader] = {
    "libsvm": Reader(_read_libsvm, own_test_rows=True, width_from_split=True, sparse=True),
    "nips2003": Reader(_read_nips2003, own_test_rows=True, width_from_split=True),
    "adult": Reader(_read_adult, own_test_rows=False, width_from_split=False),
    "fate_hetero": Reader(_read_fate_hetero, own_test_rows=False, width_from_split=False),
    "give_credit": Reader(_read_give_credit, own_test_rows=False, width_from_split=False),
    "user_csv": Reader(_read_user_csv, own_test_rows=False, width_from_split=False),
    "synthetic": Reader(_generate, own_test_rows=False, width_from_split=True),
}


# ---------------------------------------------------------------------------------------------------------
# parameters


@dataclass(frozen=True)
class DatasetParams:
    """``params.yaml: datasets.<key>``: where a dataset comes from and how it is dealt out.

    Parameters
    ----------
    partition : {"vertical", "horizontal"}
        Features split over parties (aligned by id), or rows split over agents.
    parties : list of str
        Party names (file names of their npz), in the order of the column blocks; for horizontal data
        the agents (``evaluator`` is reserved for the test rows).
    normalize : str
        Vertical: ``block_rows``, ``zscore_block_rows`` or ``fate_zscore``; horizontal: ``max_abs_rows``
        (see :mod:`ppml.data.normalize`).
    required : bool
        Whether a download failure is an error (True) or the dataset is recorded as unavailable.
    source : {"registry", "synthetic", "user"}
        Files of :mod:`ppml.data.sources` (downloaded and verified), generated data, or a CSV file the user
        supplies (data that may not be redistributed, such as IPUMS extracts).
    reader : str
        How the files are read: a key of :data:`READERS` other than ``synthetic``; ``user_csv`` for, and
        only for, user data. Omitted for synthetic data.
    files_of : str
        Registry data only, optional: the registry entry (:data:`ppml.data.sources.DATASETS`) whose files
        this dataset downloads and reads, for another split of the same data (``default_credit_2h``: Credit 1
        dealt to a guest and two hosts reads ``default_credit``'s files); by default the dataset's own key.
    n : int
        Synthetic only: number of rows (the number of columns is ``sum(split)``).
    path : str
        User data only: the CSV file, relative to the repository root and under ``data/user/`` (the
        download stage's DVC dependency, so that a changed file re-runs the pipeline).
    label_column : str
        User data only: header of the label column.
    positive_label : str
        User data only: the label that counts as 1 (quoted in YAML, ``"1"``); every other label counts as 0.
    id_column : str
        User data only, optional: header of the entity id column; without one the rows are numbered.
    negative_label : str
        User data only, optional: the label that counts as 0. Without it (and without ``other_labels:
        negative``) the file must hold exactly two distinct labels.
    other_labels : {"error", "negative"}
        User data only, optional (default ``error``): whether a label other than the positive and the
        negative one is an error or counts as 0.
    categorical : list of str
        User data only, optional: columns one-hot encoded even if their cells are numbers (codes). Any other
        column mixing numbers and text is an error.
    missing_values : list of str
        User data only, optional: the cell contents meaning "missing" (default
        :data:`ppml.data.readers.USER_MISSING`: the empty cell, ``NA``, ``N/A``, ``NaN``, ``nan``, ``?``,
        ``NULL``); records with a missing feature are dropped, a missing label is an error.
    split : list of int
        Vertical only: number of columns of each party.
    label_holder : str
        Vertical only: the party holding the labels (it also drives the alignment).
    alignment : {"psi", "plain"}
        Vertical only: private set intersection, or ids in the clear (:mod:`ppml.data.align`).
    private_fraction : float
        Vertical only: fraction of the entities that only one party holds, drawn for every party
        (``private_fraction * len(parties) < 1``); these rows are lost at alignment.
    test_fraction : float
        Vertical data whose source has no test rows of its own: the fraction of aligned entities held out
        by a seeded split stratified by label. Must be omitted when the source has its own test rows.
    train_rows : int
        Horizontal only: random rows dealt out equally to the agents; the rest are the test rows.
    """

    partition: Literal["vertical", "horizontal"]
    parties: tuple[str, ...]
    normalize: Literal["block_rows", "zscore_block_rows", "fate_zscore", "max_abs_rows"]
    required: bool = True
    source: Literal["registry", "synthetic", "user"] = "registry"
    reader: Literal["libsvm", "nips2003", "adult", "fate_hetero", "give_credit", "user_csv"] | None = None
    files_of: str | None = None
    n: int | None = field(default=None, metadata={"gt": 0})
    path: str | None = None
    label_column: str | None = None
    positive_label: str | None = None
    id_column: str | None = None
    negative_label: str | None = None
    other_labels: Literal["error", "negative"] | None = None
    categorical: tuple[str, ...] | None = None
    missing_values: tuple[str, ...] | None = None
    split: tuple[int, ...] | None = field(default=None, metadata={"gt": 0})
    label_holder: str | None = None
    alignment: Literal["psi", "plain"] | None = None
    private_fraction: float | None = field(default=None, metadata={"ge": 0, "lt": 1})
    test_fraction: float | None = field(default=None, metadata={"gt": 0, "lt": 1})
    train_rows: int | None = field(default=None, metadata={"gt": 0})

    def __post_init__(self) -> None:
        if len(set(self.parties)) != len(self.parties):
            fail("parties", f"must be distinct names, got {list(self.parties)}")
        for name in self.parties:
            if not _PARTY_NAME.fullmatch(name):
                fail("parties", f"names must be letters, digits, '_' or '-' (they name files), got {name!r}")
        self._check_source()
        if self.partition == "vertical":
            self._check_vertical()
        else:
            self._check_horizontal()

    @property
    def loader(self) -> Reader:
        """The :class:`Reader` this dataset is read (or generated) with."""
        return READERS[self._reader_key]

    @property
    def _reader_key(self) -> str:
        return "synthetic" if self.source == "synthetic" else self.reader

    def _check_source(self) -> None:
        if self.source == "synthetic":
            if self.reader is not None:
                fail("reader", f"must be omitted for synthetic data, got {self.reader!r}")
            if self.n is None:
                fail("n", "is required for synthetic data")
        else:
            if self.reader is None:
                user = self.source == "user"
                choices = [r for r in READERS if r != "synthetic" and (r == "user_csv") == user]
                fail("reader", f"is required for {self.source} data (one of {choices})")
            if self.n is not None:
                fail("n", "is only for synthetic data")
        if self.files_of is not None:
            if self.source != "registry":
                fail("files_of", f"is only for registry data, got {self.files_of!r} with source {self.source!r}")
            if self.files_of not in DATASETS:
                fail("files_of", f"must be a registry dataset ({', '.join(sorted(DATASETS))}), "
                                 f"got {self.files_of!r}")
        if (self.reader == "user_csv") != (self.source == "user"):
            fail("reader", f"must be user_csv for, and only for, source user; got reader {self.reader!r} "
                           f"with source {self.source!r}")
        required = ("path", "label_column", "positive_label")
        optional = ("id_column", "negative_label", "other_labels", "categorical", "missing_values")
        if self.source != "user":
            for name in required + optional:
                if getattr(self, name) is not None:
                    value = getattr(self, name)
                    fail(name, f"is only for user data (source: user), got "
                               f"{list(value) if isinstance(value, tuple) else value!r}")
            return
        for name in required:
            if getattr(self, name) is None:
                fail(name, "is required for user data")
        path = PurePosixPath(self.path)
        if path.is_absolute() or ".." in path.parts or path.parent.parts[:2] != USER_DIR.parts:
            fail("path", f"must be a file under {USER_DIR}/ relative to the repository root (so that DVC "
                         f"tracks it), got {self.path!r}")
        # Symlinks (of the file or of a directory on the way) are followed: data outside data/user/ would
        # not be tracked by DVC.
        resolved, user_dir = Path(self.path).resolve(), Path(USER_DIR).resolve()
        if not resolved.is_relative_to(user_dir):
            fail("path", f"must lie under {USER_DIR}/ once symlinks are resolved, got {self.path!r}, which "
                         f"resolves to {str(resolved)!r}")
        if self.id_column == self.label_column:
            fail("id_column", f"must differ from label_column, got {self.id_column!r} for both")
        self._check_user_columns()

    def _check_user_columns(self) -> None:
        if self.negative_label is not None:
            if self.negative_label.strip() == self.positive_label.strip():
                fail("negative_label", f"must differ from positive_label, got {self.negative_label!r}")
            if self.other_labels == "negative":
                fail("other_labels", "negative makes negative_label pointless: give one of the two")
        for i, name in enumerate(self.categorical or ()):
            if name in (self.label_column, self.id_column):
                fail(f"categorical[{i}]", f"must not be the label or id column, got {name!r}")
            if name in self.categorical[:i]:
                fail(f"categorical[{i}]", f"repeats {name!r}")
        for i, token in enumerate(self.missing_values or ()):
            if token != token.strip():
                fail(f"missing_values[{i}]", f"must not have surrounding spaces (cells are compared "
                                             f"stripped), got {token!r}")
            if token in (self.positive_label.strip(), (self.negative_label or "").strip() or None):
                fail(f"missing_values[{i}]", f"must not be a label, got {token!r}")

    def _check_vertical(self) -> None:
        for name in ("split", "label_holder", "alignment", "private_fraction"):
            if getattr(self, name) is None:
                fail(name, "is required for vertical data")
        if len(self.parties) < 2:
            fail("parties", f"vertical data needs at least two parties, got {list(self.parties)}")
        if len(self.split) != len(self.parties):
            fail("split", f"must give the columns of each of the {len(self.parties)} parties, "
                          f"got {list(self.split)}")
        if self.label_holder not in self.parties:
            fail("label_holder", f"must be one of the parties {list(self.parties)}, "
                                 f"got {self.label_holder!r}")
        if self.private_fraction * len(self.parties) >= 1:
            fail("private_fraction", f"times the {len(self.parties)} parties must be < 1 (some entities "
                                     f"must be shared by all), got {self.private_fraction}")
        if self.normalize not in VERTICAL:
            fail("normalize", f"must be one of {sorted(VERTICAL)} for vertical data, got {self.normalize!r}")
        if self.loader.sparse and self.normalize == "zscore_block_rows":
            fail("normalize", f"zscore_block_rows would densify the sparse {self._reader_key} data; "
                              "use block_rows")
        if self.loader.own_test_rows and self.test_fraction is not None:
            fail("test_fraction", "must be omitted: this source has its own test rows")
        if not self.loader.own_test_rows and self.test_fraction is None:
            fail("test_fraction", "is required: this source has no test rows of its own")
        if self.train_rows is not None:
            fail("train_rows", "is only for horizontal data")

    def _check_horizontal(self) -> None:
        for name in ("split", "label_holder", "alignment", "private_fraction", "test_fraction"):
            if getattr(self, name) is not None:
                fail(name, "is only for vertical data")
        if self.train_rows is None:
            fail("train_rows", "is required for horizontal data")
        if EVALUATOR in self.parties:
            fail("parties", f"{EVALUATOR!r} is reserved for the test rows of horizontal data")
        if self.normalize not in HORIZONTAL:
            fail("normalize", f"must be one of {sorted(HORIZONTAL)} for horizontal data, "
                              f"got {self.normalize!r}")
        if self.loader.width_from_split:
            fail("partition", "horizontal data needs a reader whose files name their columns "
                              f"({self._reader_key} takes them from split)")


def dataset_params(params: Mapping[str, Any], key: str) -> DatasetParams:
    """Validated ``datasets.<key>`` of a params mapping (errors name the key path)."""
    return build(DatasetParams, section(params, f"datasets.{key}"), f"datasets.{key}")


# ---------------------------------------------------------------------------------------------------------
# the stage


def prepare_dataset(key: str, params: DatasetParams, raw_dir: str | Path, out_dir: str | Path, *,
                    rng: np.random.Generator) -> dict[str, Any]:
    """Prepare dataset `key`: read, deal out, align, split, normalize, write (see the module docstring).

    Parameters
    ----------
    key : str
        Dataset key (file names of registry sources derive from it).
    params : DatasetParams
        The dataset's validated parameters.
    raw_dir : path
        ``data/raw/<key>``: the verified files and the download's ``status.json``.
    out_dir : path
        ``data/prepared/<key>``; replaced as a whole, only once everything is written.
    rng : numpy.random.Generator
        Drives every random choice (synthetic data, row orders, private ids, splits). Its seed is recorded
        in the manifest.

    Returns
    -------
    dict
        The manifest written.

    Raises
    ------
    DataUnavailable
        The download recorded the dataset as unavailable although `params` says it is required.
    ValueError
        Malformed raw files (:class:`ppml.data.readers.DataFormatError`), a column split that does not fit
        the data, or ids that cannot be aligned (:class:`ppml.data.align.AlignmentError`).
    """
    raw_dir = Path(raw_dir)
    remove_stale_staging(out_dir)
    status = read_status(raw_dir)
    manifest: dict[str, Any] = {"dataset": key, "available": status["available"]}
    if not status["available"]:
        reason = status.get("reason", "the download stage recorded it as unavailable")
        if params.required:
            raise DataUnavailable(f"dataset {key!r} is required, but {raw_dir / 'status.json'} says it is "
                                  f"unavailable: {reason}")
        log.warning("%s: unavailable (%s); writing a manifest that says so", key, reason)
        manifest.update(reason=reason, params=manifest_params(params))
        with staging_dir(out_dir) as staging:
            write_json(staging / MANIFEST, manifest)
        return manifest

    data_rng, dealing_rng = rng.spawn(2)
    # file names follow the registry key whose files these are (the dataset's own unless files_of says)
    table = params.loader.load(raw_dir, key=params.files_of or key, params=params, rng=data_rng)
    log.info("%s: %d rows x %d columns read", key, *table.X.shape)
    manifest.update(partition=params.partition,
                    source={"source": params.source, "reader": params.reader, "rows": int(table.X.shape[0]),
                            "columns": int(table.X.shape[1]), **table.info})
    prepare = _prepare_vertical if params.partition == "vertical" else _prepare_horizontal
    with staging_dir(out_dir) as staging:
        try:
            manifest.update(prepare(table, params, staging, rng=dealing_rng))
        except NormalizationError as exc:
            raise NormalizationError(f"dataset {key!r}, {exc}") from None
        manifest.update(normalization={"method": params.normalize},
                        seed=_seed_of(rng), params=manifest_params(params))
        write_json(staging / MANIFEST, manifest)
    return manifest


def manifest_params(params: DatasetParams) -> dict[str, Any]:
    """The dataset's parameters as its manifest records them; ``files_of`` only when set, so that the
    manifest of a dataset that reads its own files stays what it was before the key existed."""
    fields = flat_fields(params)
    if fields["files_of"] is None:
        del fields["files_of"]
    return fields


def _check_blocks(split: tuple[int, ...], blocks: tuple[int, ...] | None) -> None:
    """A source split by party (FATE's guest and host files) may be dealt to more parties than it has files,
    each file's columns divided among consecutive parties (Credit 1's host file of 10 to two hosts of 5: split
    [13, 5, 5]), but no party may hold columns of two files: every boundary between files must be one between
    parties."""
    if blocks is None:
        return
    ends = set(np.cumsum(split).tolist())
    if sum(split) != sum(blocks) or not set(np.cumsum(blocks).tolist()) <= ends:
        raise ValueError(f"split {list(split)} does not match the source's own party files, which hold "
                         f"{list(blocks)} columns: each file's columns must go to one or more consecutive "
                         f"parties, in the files' order")


def _prepare_vertical(table: Table, params: DatasetParams, staging: Path, *,
                      rng: np.random.Generator) -> dict[str, Any]:
    _check_blocks(tuple(params.split), table.blocks)
    holding_rng, split_rng = rng.spawn(2)
    holdings = vertical_holdings(table, parties=params.parties, split=params.split,
                                 private_fraction=params.private_fraction, rng=holding_rng)
    network = Network(params.parties)
    alignment = align({h.name: h.ids for h in holdings}, label_holder=params.label_holder,
                      method=params.alignment, network=network)
    log.info("%s alignment: %d of %s rows shared", params.alignment, len(alignment.ids),
             [len(h.ids) for h in holdings])
    holder = next(h for h in holdings if h.name == params.label_holder)
    entities = holder.rows[alignment.rows[holder.name]]
    if table.test is not None:
        test = table.test[entities]
        split = {"method": "source test rows"}
    else:
        test = stratified_test_mask(table.y[entities], test_fraction=params.test_fraction, rng=split_rng)
        split = {"method": "stratified", "test_fraction": params.test_fraction}
    split.update(train=int((~test).sum()), test=int(test.sum()))
    normalize = VERTICAL[params.normalize]

    entries = []
    for holding in holdings:
        # Each party gathers its own block of its own rows, in the aligned order.
        rows = holding.rows[alignment.rows[holding.name]]
        X = table.X[rows, holding.columns]
        raw_train, raw_test = X[~test], X[test]
        columns = table.columns[holding.columns]
        try:
            X_train, X_test = normalize(raw_train, raw_test)
        except NotZScoredError as exc:  # name the party and the column, not a position in its block
            raise NormalizationError(
                f"party {holding.name}: fate_zscore keeps the values as given, so they must be z-scores "
                f"already, but column {columns[exc.column]!r} holds {exc.value:g}, beyond {ZSCORE_BOUND:.0f} "
                "(no z-score over a feasible number of rows is that large): these data are not z-scored; "
                "choose normalize: zscore_block_rows, or scale the file") from None
        check_normalized(params.normalize, raw_train, X_train, alignment.ids[~test], columns,
                         party=holding.name, train=True)
        check_normalized(params.normalize, raw_test, X_test, alignment.ids[test], columns,
                         party=holding.name, train=False)
        labels = table.y[rows] if holding.name == params.label_holder else None
        party = Party(name=holding.name, columns=table.columns[holding.columns], ids=alignment.ids[~test],
                      X=X_train, y=None if labels is None else labels[~test], test_ids=alignment.ids[test],
                      X_test=X_test, y_test=None if labels is None else labels[test])
        entries.append(write_shard(staging, party, rows_before=len(holding.ids), rows_after=len(rows)))
    traffic = network.summary()
    return {
        "parties": entries,
        "evaluator": None,
        "alignment": {"method": params.alignment, "label_holder": params.label_holder,
                      "private_fraction": params.private_fraction, "shared_ids": int(len(alignment.ids)),
                      "dropped": {h.name: int(len(h.ids) - len(alignment.ids)) for h in holdings},
                      "messages": traffic["messages"], "bytes": traffic["bytes"]},
        "split": split,
    }


def _prepare_horizontal(table: Table, params: DatasetParams, staging: Path, *,
                        rng: np.random.Generator) -> dict[str, Any]:
    agent_rows, test_rows = deal_rows(len(table.ids), train_rows=params.train_rows,
                                      agents=len(params.parties), rng=rng)
    train_rows = np.concatenate(agent_rows)
    X_train, X_test = HORIZONTAL[params.normalize](table.X[train_rows], table.X[test_rows])
    pooled = "+".join(params.parties)  # the training rows are normalized together
    check_normalized(params.normalize, table.X[train_rows], X_train, table.ids[train_rows], table.columns,
                     party=pooled, train=True)
    check_normalized(params.normalize, table.X[test_rows], X_test, table.ids[test_rows], table.columns,
                     party=EVALUATOR, train=False)
    # X_train holds the agents' rows one after the other; agent k's are rows starts[k]:ends[k].
    ends = np.cumsum([len(rows) for rows in agent_rows])
    starts = ends - [len(rows) for rows in agent_rows]
    entries = []
    for name, rows, start, end in zip(params.parties, agent_rows, starts, ends):
        party = Party(name=name, columns=table.columns, ids=table.ids[rows], X=X_train[start:end],
                      y=table.y[rows])
        entries.append(write_shard(staging, party, rows_before=len(rows), rows_after=len(rows)))
    evaluator = Party(name=EVALUATOR, columns=table.columns, ids=table.ids[test_rows], X=X_test,
                      y=table.y[test_rows])
    return {
        "parties": entries,
        "evaluator": write_shard(staging, evaluator, rows_before=len(test_rows), rows_after=len(test_rows)),
        "alignment": {"method": "none", "reason": "horizontal data: the agents hold different entities"},
        "split": {"method": "random rows", "train": int(len(train_rows)), "test": int(len(test_rows))},
    }


class NormalizationError(ValueError):
    """Normalization produced a non-finite value, or zeroed a row or column that was not zero."""


def check_normalized(method: str, before: Any, after: Any, ids: np.ndarray, columns: tuple[str, ...], *,
                     party: str, train: bool) -> None:
    """Refuse a normalized block with a defect (:func:`ppml.data.normalize.collapse`), naming the
    party and the row id or column (:func:`prepare_dataset` adds the dataset)."""
    defect = collapse(before, after, train=train)
    if defect is None:
        return
    kind, index = defect
    rows = "training" if train else "test"
    where = (f"column {columns[index]!r}" if kind == "zero column"
             else f"{rows} row with id {str(ids[index])!r}")
    problem = {"non-finite row": "a value that is NaN or infinite",
               "zero row": "only zeros although it had a nonzero value",
               "zero column": "only zeros over the training rows although it was not constant"}[kind]
    raise NormalizationError(f"party {party}: {method} normalization left {where} with {problem}; "
                             f"check the raw data for extreme values")


def write_shard(staging: Path, party: Party, *, rows_before: int, rows_after: int) -> dict[str, Any]:
    """Save `party` as ``<name>.npz``; return its manifest entry."""
    file = f"{party.name}.npz"
    save_party(staging / file, party)
    return {"name": party.name, "file": file, "label_holder": party.is_label_holder,
            "columns": len(party.columns), "column_names": list(party.columns),
            "rows_before": int(rows_before), "rows_after": int(rows_after),
            "train_rows": int(party.n_samples),
            "test_rows": 0 if party.X_test is None else int(party.X_test.shape[0])}


def _seed_of(rng: np.random.Generator) -> Any:
    """The entropy `rng` was seeded with (and its spawn key, if it is a child), for the manifest."""
    seed_seq = rng.bit_generator.seed_seq
    entropy = seed_seq.entropy
    seed = entropy if isinstance(entropy, int) else [int(e) for e in entropy]
    return {"entropy": seed, "spawn_key": list(seed_seq.spawn_key)} if seed_seq.spawn_key else seed


def _staging_pattern(out_dir: Path) -> re.Pattern[str]:
    """Names :func:`staging_dir` gives its directories for `out_dir` (tempfile's 8 random characters)."""
    return re.compile(rf"\.{re.escape(out_dir.name)}\.[a-z0-9_]{{8}}\.tmp")


def remove_stale_staging(out_dir: str | Path) -> None:
    """Remove staging directories of `out_dir` left by a killed run (a run that ends removes its own).

    Only directories named by :func:`_staging_pattern` for this very output directory are touched. DVC
    never runs one stage twice at once, so such a directory belongs to no live run.
    """
    out_dir = Path(out_dir)
    if not out_dir.parent.is_dir():
        return
    pattern = _staging_pattern(out_dir)
    for entry in out_dir.parent.iterdir():
        if pattern.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            log.warning("removing %s, left by an interrupted prepare", entry)
            shutil.rmtree(entry)


@contextmanager
def staging_dir(out_dir: str | Path) -> Iterator[Path]:
    """A temporary directory beside `out_dir` that replaces it only if the block succeeds."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        yield staging
        staging.chmod(0o755)  # mkdtemp's 0700 would otherwise become the output's permissions
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
