"""Readers for the raw dataset files: LIBSVM, the UCI Adult files, CSV tables (the registry's and a user's),
and NIPS 2003 dense matrices.

Readers only read: they return arrays or data frames and never write. Every malformed input raises
:class:`DataFormatError` naming the file, the 1-based line number and the offending value, so that a bad
download or a hand-edited copy is caught at the first wrong token instead of surfacing as a strange model.
Binary labels are returned as ``int8`` 0/1 (the convention of :class:`ppml.parties.Party`), whatever the
file's own coding.

Parsing is done per line in Python (fast enough: a9a takes about 0.2 s, the largest file, cs-training.csv,
about a second) and the numeric checks are vectorized; when a whole-array conversion fails, the first token that
does not convert is searched for so that the error can name it.
"""

from __future__ import annotations

import csv
import io
import itertools
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

#: Attribute names of the UCI Adult files, in file order (from adult.names), plus the label ``income``.
ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
)
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
_ADULT_INCOME = {"<=50K": 0, ">50K": 1}
#: Cell contents that mean "missing" in the CSV tables (cs-training.csv writes ``NA``).
CSV_MISSING = ("", "NA", "NaN", "nan")
#: Default cell contents (surrounding spaces removed) that mean "missing" in a user's CSV file.
USER_MISSING = ("", "NA", "N/A", "NaN", "nan", "?", "NULL")
#: What :func:`read_user_csv` does with a label that is neither the positive nor the negative one.
OTHER_LABELS = ("error", "negative")


class DataFormatError(ValueError):
    """A raw data file is malformed.

    Attributes
    ----------
    path : str
        The file.
    line : int
        1-based line number of the offending value.
    value : str
        The offending token, field or line.
    """

    def __init__(self, path: str | Path, line: int, problem: str, value: Any) -> None:
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        self.path = str(path)
        self.line = int(line)
        self.value = str(value)
        super().__init__(f"{path}, line {self.line}: {problem}: {self.value!r}")


def read_libsvm(path: str | Path, *, n_features: int) -> tuple[sp.csr_array, np.ndarray]:
    """Read a LIBSVM/svmlight file of binary labels.

    Parameters
    ----------
    path : path
        One sample per line: ``<label> <index>:<value> ...`` with 1-based, strictly increasing indices.
    n_features : int
        Number of columns. Explicit because a file need not use its last column (a9a.t's largest index is
        122, a9a's is 123).

    Returns
    -------
    X : scipy.sparse.csr_array of float64, shape (n_samples, n_features)
    y : ndarray of int8 in {0, 1}
        Labels may be written as -1/+1 or as 0/1 (not both in one file); +1 and 1 map to 1.

    Raises
    ------
    DataFormatError
        Empty line, a token that is not ``int:float`` (numbers parse as the CSV readers parse them: a
        digit-group underscore, ``1:1_0``, is refused), an index outside 1..n_features, an index not greater
        than the previous one in its row (duplicate or unsorted), a NaN or infinite value, a label outside
        {-1, 0, +1} or a file mixing the -1/+1 and 0/1 codings.
    """
    path = Path(path)
    _check_positive("n_features", n_features)
    lines = _number_lines(path)
    labels: list[bytes] = []
    counts: list[int] = []
    tokens: list[bytes] = []
    for number, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            raise DataFormatError(path, number, "empty line", line)
        labels.append(parts[0])
        counts.append(len(parts) - 1)
        tokens += parts[1:]
    n_rows = len(labels)
    row_of_token = np.repeat(np.arange(n_rows), counts)
    token_line = row_of_token + 1
    label_line = np.arange(1, n_rows + 1)

    label_values = _convert(path, labels, float, np.float64, label_line, "label is not a number")
    _first_error(path, ~np.isin(label_values, (-1.0, 0.0, 1.0)), label_line, labels,
                 "label outside {-1, +1} and {0, 1}")
    if (label_values == -1).any() and (label_values == 0).any():
        k = max(int(np.argmax(label_values == -1)), int(np.argmax(label_values == 0)))
        raise DataFormatError(path, k + 1, "labels mix the -1/+1 and 0/1 codings", labels[k])

    pairs = [t.partition(b":") for t in tokens]
    no_colon = np.fromiter((not colon for _, colon, _ in pairs), bool, len(pairs))
    _first_error(path, no_colon, token_line, tokens, "feature token is not index:value")
    index = _convert(path, [p[0] for p in pairs], int, np.int64, token_line,
                     "feature index is not a 64-bit integer", shown=tokens)
    values = _convert(path, [p[2] for p in pairs], float, np.float64, token_line,
                      "feature value is not a number", shown=tokens)
    _first_error(path, (index < 1) | (index > n_features), token_line, tokens,
                 f"feature index outside 1..{n_features}")
    follows = np.zeros(len(tokens), dtype=bool)
    follows[1:] = (row_of_token[1:] == row_of_token[:-1]) & (index[1:] <= index[:-1])
    _first_error(path, follows, token_line, tokens,
                 "feature index not greater than the previous one in its row")
    _first_error(path, ~np.isfinite(values), token_line, tokens, "feature value is NaN or infinite")

    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    X = sp.csr_array((values, (index - 1).astype(np.int32), indptr), shape=(n_rows, n_features))
    return X, (label_values == 1).astype(np.int8)


def read_adult(path: str | Path) -> pd.DataFrame:
    """Read adult.data or adult.test of the UCI Adult data set.

    Parameters
    ----------
    path : path
        Comma-separated records of 14 attributes and the income class. adult.test's first line
        (``|1x3 Cross validator``) is skipped, the trailing ``.`` of its labels is dropped, and blank lines at
        the end of the file are ignored.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ADULT_COLUMNS`: the :data:`ADULT_NUMERIC` attributes as float64, the others as strings,
        ``?`` as missing (NaN) in both, and ``income`` as int8 (1 for ``>50K``).

    Raises
    ------
    DataFormatError
        A blank line before the end, a record without 15 fields, an empty field, a non-numeric or infinite
        numeric attribute, or an income other than ``<=50K``/``>50K``.
    """
    path = Path(path)
    lines = _read_text(path).split("\n")
    start = 1 if lines and lines[0].startswith("|") else 0
    end = len(lines)
    while end > start and not lines[end - 1].strip():
        end -= 1
    if end == start:
        raise DataFormatError(path, start + 1, "no records", "")
    records = []
    for number in range(start, end):
        fields = [field.strip() for field in lines[number].split(",")]
        if len(fields) != len(ADULT_COLUMNS):
            problem = (f"expected {len(ADULT_COLUMNS)} fields, found {len(fields)}" if lines[number].strip()
                       else "blank line")
            raise DataFormatError(path, number + 1, problem, lines[number])
        records.append(fields)
    line_numbers = np.arange(start + 1, end + 1)
    columns = dict(zip(ADULT_COLUMNS, zip(*records)))

    frame = {}
    for name in ADULT_COLUMNS[:-1]:
        cells = pd.Series(columns[name], dtype=object)
        _first_error(path, (cells == "").to_numpy(), line_numbers, columns[name], f"empty field {name}")
        missing = (cells == "?").to_numpy()
        if name in ADULT_NUMERIC:
            frame[name] = _numeric(path, name, columns[name], missing, line_numbers)
        else:
            frame[name] = cells.mask(missing)
    income = [label.removesuffix(".") for label in columns["income"]]
    known = np.fromiter((label in _ADULT_INCOME for label in income), bool, len(income))
    _first_error(path, ~known, line_numbers, columns["income"], "income is not <=50K or >50K")
    frame["income"] = np.fromiter((_ADULT_INCOME[label] for label in income), np.int8, len(income))
    return pd.DataFrame(frame)


def row_ids(prefix: str, n: int) -> np.ndarray:
    """``<prefix>-01``, ... ``<prefix>-<n>`` zero-padded to one width, for sources without an id column.

    The padding makes the ids sort in row order.
    """
    return np.char.add(f"{prefix}-", np.char.zfill(np.arange(1, n + 1).astype(str), len(str(n))))


def read_csv_table(path: str | Path, *, id_column: str, label_column: str | None = None,
                   expected_labels: tuple[Any, Any] = (0, 1),
                   allow_missing: bool = False) -> tuple[np.ndarray, pd.DataFrame, np.ndarray | None]:
    """Read a CSV table with a header, an id column, numeric features and optionally a binary label.

    Parameters
    ----------
    path : path
        A CSV file (``UCI_Credit_Card.csv``, FATE's ``default_credit_hetero_{guest,host}.csv``,
        ``cs-training.csv``) whose first line names the columns.
    id_column : str
        Header of the entity id column (``""`` for cs-training.csv's unnamed first column).
    label_column : str, optional
        Header of the label column; None for a party without labels.
    expected_labels : (negative, positive)
        How the file codes the two classes; the positive one maps to 1.
    allow_missing : bool
        Whether empty or ``NA``/``NaN`` feature cells are accepted (as NaN). Labels may never be missing.

    Returns
    -------
    ids : ndarray of str
        The id column as written, in file order.
    features : pandas.DataFrame of float64
        Every other column (neither id nor label) in file order, named by its header.
    labels : ndarray of int8 in {0, 1}, or None

    Raises
    ------
    DataFormatError
        A repeated or missing column name in the header, a row with the wrong number of fields (or an empty
        line), an empty or duplicate id, a non-numeric or infinite cell, a missing cell when not allowed, or
        a label outside `expected_labels`.
    """
    path = Path(path)
    _check_pair("expected_labels", expected_labels)
    header, table, line_numbers = _csv_table(path, (id_column, label_column))
    ids = _unique_ids(path, table[:, header.index(id_column)], id_column, line_numbers)

    labels = None
    if label_column is not None:
        cells = table[:, header.index(label_column)]
        values = _numeric(path, label_column, cells, np.zeros(len(cells), dtype=bool), line_numbers)
        _first_error(path, ~np.isin(values, expected_labels), line_numbers, cells,
                     f"label outside {tuple(expected_labels)}")
        labels = (values == expected_labels[1]).astype(np.int8)

    features = {}
    for j, name in enumerate(header):
        if name in (id_column, label_column):
            continue
        missing = pd.Series(table[:, j]).isin(CSV_MISSING).to_numpy()
        if not allow_missing:
            _first_error(path, missing, line_numbers, table[:, j], f"missing value in column {name!r}")
        features[name] = _numeric(path, name, table[:, j], missing, line_numbers)
    return ids, pd.DataFrame(features, columns=list(features)), labels


def read_user_csv(path: str | Path, *, label_column: str, positive_label: str, id_column: str | None = None,
                  negative_label: str | None = None, other_labels: str = "error",
                  categorical: Sequence[str] = (), missing_values: Sequence[str] = USER_MISSING,
                  ) -> tuple[np.ndarray, pd.DataFrame, np.ndarray, dict[str, int]]:
    """Read a CSV table a user supplies (``source: user``), e.g. an IPUMS extract, with mixed column types.

    Parameters
    ----------
    path : path
        A CSV file whose first line names the columns (a UTF-8 byte order mark is ignored).
    label_column : str
        Header of the label column.
    positive_label : str
        The label (as written, surrounding spaces ignored) that counts as 1.
    id_column : str, optional
        Header of the entity id column; without one, the data rows are numbered ``row-1``, ... (zero-padded,
        see :func:`row_ids`).
    negative_label : str, optional
        The label that counts as 0. Without it, the file must hold exactly two distinct labels (unless
        `other_labels` is ``"negative"``).
    other_labels : {"error", "negative"}
        What a label other than the positive and negative ones is: an error, or a 0.
    categorical : sequence of str
        Columns whose cells are categories even if they look like numbers (IPUMS' numeric codes): kept as
        strings. Any other column must be all numbers or all text (missing cells aside).
    missing_values : sequence of str
        Cell contents (surrounding spaces removed) that mean "missing".

    Returns
    -------
    ids : ndarray of str
        The ids, in file order.
    features : pandas.DataFrame
        Every other column in file order, named by its header: float64 when every present cell is a number
        (and the column is not `categorical`), else the cells as strings (surrounding spaces removed).
        Missing cells are NaN in both; the caller decides what to do with such rows and how to encode the
        strings.
    labels : ndarray of int8 in {0, 1}
    label_counts : dict
        Number of rows of every label as written (spaces removed), in order of first appearance.

    Raises
    ------
    DataFormatError
        A repeated name in the header or a missing label, id or categorical column, a row with the wrong
        number of fields (or an empty line), an empty or duplicate id, a missing label, labels of one class
        only (which usually means a mistyped `positive_label`), a label other than the two allowed (or a
        third distinct one), a label numerically equal to `positive_label` but written differently
        (`` 1.0`` for ``1``), an infinite number, or a column mixing numbers and text that is not declared
        `categorical`.
    """
    path = Path(path)
    if other_labels not in OTHER_LABELS:
        raise ValueError(f"other_labels must be one of {list(OTHER_LABELS)}, got {other_labels!r}")
    header, table, line_numbers = _csv_table(path, (id_column, label_column, *categorical))
    if id_column is None:
        ids = row_ids("row", len(table))
    else:
        ids = _unique_ids(path, table[:, header.index(id_column)], id_column, line_numbers)

    cells = pd.Series(table[:, header.index(label_column)], dtype=object).str.strip()
    _first_error(path, cells.isin(missing_values).to_numpy(), line_numbers, cells,
                 f"missing label in column {label_column!r}")
    labels = _binary_labels(path, cells, line_numbers, column=label_column, positive=positive_label,
                            negative=negative_label, other=other_labels)
    counts = {str(label): int(count) for label, count in cells.value_counts(sort=False).items()}

    features = {}
    for j, name in enumerate(header):
        if name in (id_column, label_column):
            continue
        cells = pd.Series(table[:, j], dtype=object).str.strip()
        missing = cells.isin(missing_values).to_numpy()
        if name in categorical:
            features[name] = cells.mask(missing)
            continue
        numbers = pd.to_numeric(cells.mask(missing), errors="coerce").to_numpy(np.float64)
        text = np.isnan(numbers) & ~missing
        if text.any() and not text[~missing].all():
            # Numbers and text mixed: name the first cell of the minority kind.
            stray = text if text.sum() * 2 <= (~missing).sum() else ~missing & ~text
            kind = "not a number in numeric" if stray is text else "a number in text"
            _first_error(path, stray, line_numbers, cells,
                         f"{kind} column {name!r} ({int((~text & ~missing).sum())} of "
                         f"{int((~missing).sum())} "
                         f"present cells are numbers; declare the column in categorical if it is one, or "
                         f"list the token in missing_values if it means missing)")
        if text.any():
            features[name] = cells.mask(missing)
        else:
            features[name] = _numeric(path, name, cells, missing, line_numbers)  # refuses infinities
    return ids, pd.DataFrame(features, columns=list(features)), labels, counts


def _binary_labels(path: Path, cells: pd.Series, line_numbers: np.ndarray, *, column: str, positive: str,
                   negative: str | None, other: str) -> np.ndarray:
    """Labels (stripped cells) as int8 0/1, refusing anything the rules of :func:`read_user_csv` forbid."""
    values = cells.to_numpy(dtype=object)
    try:
        as_number = float(positive)
    except ValueError:
        as_number = None
    if as_number is not None:
        numbers = pd.to_numeric(cells, errors="coerce").to_numpy(np.float64)
        _first_error(path, (numbers == as_number) & (values != positive), line_numbers, values,
                     f"label in column {column!r} equals the positive label {positive!r} as a number but is "
                     f"written differently")
    labels = (values == positive).astype(np.int8)
    if labels.min() == labels.max():
        found = ", ".join(repr(label) for label in cells.unique()[:5])
        relation = "equal to" if labels[0] else "different from"
        raise DataFormatError(path, 1, f"every label in column {column!r} is {relation} the positive "
                                       f"label (labels found: {found}); both classes are needed", positive)
    if negative is not None:
        if not (values == negative).any():
            raise DataFormatError(path, 1, f"no label in column {column!r} is the negative label", negative)
        if other == "error":
            _first_error(path, (values != positive) & (values != negative), line_numbers, values,
                         f"label in column {column!r} is neither the positive label {positive!r} nor the "
                         f"negative label {negative!r}")
    elif other == "error":
        distinct = cells.unique()
        if len(distinct) > 2:
            _first_error(path, values == distinct[2], line_numbers, values,
                         f"a third distinct label in column {column!r} (first two: "
                         f"{', '.join(repr(v) for v in distinct[:2])}); give negative_label, or "
                         f"other_labels: negative to count every label but {positive!r} as 0")
    return labels


def read_dense_matrix(path: str | Path, *, n_features: int) -> np.ndarray:
    """Read a whitespace-separated numeric matrix, one row per line (MADELON, ARCENE, GISETTE ``.data``).

    Parameters
    ----------
    path : path
        Rows of exactly `n_features` numbers; trailing spaces (as in the NIPS 2003 files) are fine.
    n_features : int
        Expected number of values per row.

    Returns
    -------
    ndarray of float64, shape (n_samples, n_features)

    Raises
    ------
    DataFormatError
        An empty line, a row with another number of values, a token that is not a number, NaN or infinity.
    """
    path = Path(path)
    _check_positive("n_features", n_features)
    rows = [line.split() for line in _number_lines(path)]
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    short = np.flatnonzero(lengths != n_features)
    if short.size:
        k = short[0]
        problem = "empty line" if lengths[k] == 0 else f"expected {n_features} values, found {lengths[k]}"
        raise DataFormatError(path, k + 1, problem, b" ".join(rows[k])[:80])
    tokens = list(itertools.chain.from_iterable(rows))
    token_line = np.repeat(np.arange(1, len(rows) + 1), n_features)
    values = _convert(path, tokens, float, np.float64, token_line, "value is not a number")
    _first_error(path, ~np.isfinite(values), token_line, tokens, "value is NaN or infinite")
    return values.reshape(len(rows), n_features)


def read_labels(path: str | Path, *, expected: tuple[Any, Any] = (-1, 1)) -> np.ndarray:
    """Read a file of binary labels, one per line (MADELON, ARCENE, GISETTE ``.labels``).

    Parameters
    ----------
    path : path
        One number per line.
    expected : (negative, positive)
        How the file codes the two classes; the positive one maps to 1.

    Returns
    -------
    ndarray of int8 in {0, 1}

    Raises
    ------
    DataFormatError
        An empty line, more than one token on a line, a non-number, or a label outside `expected`.
    """
    path = Path(path)
    _check_pair("expected", expected)
    rows = [line.split() for line in _number_lines(path)]
    wrong = [k for k, row in enumerate(rows) if len(row) != 1]
    if wrong:
        k = wrong[0]
        raise DataFormatError(path, k + 1, "expected one label per line", b" ".join(rows[k]))
    tokens = [row[0] for row in rows]
    line_numbers = np.arange(1, len(tokens) + 1)
    values = _convert(path, tokens, float, np.float64, line_numbers, "label is not a number")
    _first_error(path, ~np.isin(values, expected), line_numbers, tokens, f"label outside {tuple(expected)}")
    return (values == expected[1]).astype(np.int8)


def _byte_lines(path: Path) -> list[bytes]:
    """The file's lines without their newlines; the newline ending the last line does not start another."""
    lines = path.read_bytes().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if not lines:
        raise DataFormatError(path, 1, "empty file", "")
    return lines


def _number_lines(path: Path) -> list[bytes]:
    """The lines of a file of numbers only (LIBSVM, a dense matrix, labels), as :func:`_byte_lines`.

    Numbers are parsed by Python's int() and float(), which also read digit-group underscores (``1_0`` is
    10, ``-0_1`` is -1); no data file means them and the CSV readers (pandas) refuse them, so a token with
    one is refused here, naming its line. Such files hold no other text, so one scan of the file finds them.
    """
    lines = _byte_lines(path)
    if b"_" in b"\n".join(lines):
        k = next(k for k, line in enumerate(lines) if b"_" in line)
        token = next(t for t in lines[k].split() if b"_" in t)
        raise DataFormatError(path, k + 1, "not a number (a digit-group underscore, which the CSV readers "
                                           "refuse too)", token)
    return lines


def _csv_rows(path: Path) -> tuple[list[list[str]], np.ndarray]:
    """All records of a CSV file and the line each starts on."""
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        rows = list(reader)
        if reader.line_num == len(rows):  # no quoted newlines: record k is line k + 1
            return rows, np.arange(1, len(rows) + 1)
        reader = csv.reader(io.StringIO(text, newline=""))
        starts = [1]
        for _ in reader:
            starts.append(reader.line_num + 1)
    except csv.Error as exc:
        raise DataFormatError(path, reader.line_num, "not valid CSV", str(exc)) from None
    return rows, np.asarray(starts[:-1])


def _csv_table(path: Path, columns: Sequence[str | None]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The header, the cells (rows, columns) as an object array of str, and each row's line number.

    Every name in `columns` (None entries skipped) must be in the header, and every row as long as it.
    """
    rows, row_lines = _csv_rows(path)
    if not rows:
        raise DataFormatError(path, 1, "no header line", "")
    header, rows, line_numbers = rows[0], rows[1:], row_lines[1:]
    repeated = [name for k, name in enumerate(header) if name in header[:k]]
    if repeated:
        raise DataFormatError(path, 1, "column name repeated in the header", repeated[0])
    for name in columns:
        if name is not None and name not in header:
            raise DataFormatError(path, 1, f"missing column (columns: {', '.join(header)})", name)
    if not rows:
        raise DataFormatError(path, 2, "no data rows", "")
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    ragged = np.flatnonzero(lengths != len(header))
    if ragged.size:
        k = ragged[0]
        problem = "empty line" if lengths[k] == 0 else f"expected {len(header)} fields, found {lengths[k]}"
        raise DataFormatError(path, line_numbers[k], problem, ",".join(rows[k]))
    return header, np.array(rows, dtype=object), line_numbers  # column slices need no per-row loop


def _unique_ids(path: Path, cells: np.ndarray, name: str, line_numbers: np.ndarray) -> np.ndarray:
    """An id column as str, refusing empty and repeated ids."""
    ids = cells.astype(str)
    _first_error(path, ids == "", line_numbers, ids, f"empty id in column {name!r}")
    duplicated = pd.Series(ids).duplicated().to_numpy()
    if duplicated.any():
        k = int(np.argmax(duplicated))
        first = line_numbers[int(np.argmax(ids == ids[k]))]
        raise DataFormatError(path, line_numbers[k], f"duplicate id (first on line {first})", ids[k])
    return ids


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")  # a byte order mark is no part of the first field
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, raw.count(b"\n", 0, exc.start) + 1, "not UTF-8 text",
                              raw[exc.start:exc.end]) from None


def _convert(path: Path, tokens: Sequence[Any], convert: Callable[[Any], Any], dtype: type,
             line_of: np.ndarray, problem: str, *, shown: Sequence[Any] | None = None) -> np.ndarray:
    """Convert every token with `convert` (int or float, whose parsing of bytes is Python's own).

    On failure, the first token that does not convert is named; ``shown[k]`` is what the error displays
    for token k (the whole ``index:value`` token rather than its half).
    """
    try:
        return np.fromiter(map(convert, tokens), dtype=dtype, count=len(tokens))
    except (ValueError, OverflowError):
        k = next(k for k, token in enumerate(tokens) if not _converts(convert, dtype, token))
        raise DataFormatError(path, line_of[k], problem, (shown or tokens)[k]) from None


def _converts(convert: Callable[[Any], Any], dtype: type, token: Any) -> bool:
    try:
        dtype(convert(token))  # through dtype too: an int may parse yet not fit in int64
    except (ValueError, OverflowError):
        return False
    return True


def _numeric(path: Path, name: str, cells: Sequence[str], missing: np.ndarray,
             line_numbers: np.ndarray) -> np.ndarray:
    """Cells of one column as float64; `missing` cells become NaN, anything else must be a finite number."""
    values = pd.to_numeric(pd.Series(cells, dtype=object).mask(missing), errors="coerce").to_numpy(np.float64)
    _first_error(path, np.isnan(values) & ~missing, line_numbers, cells, f"not a number in column {name!r}")
    _first_error(path, np.isinf(values), line_numbers, cells, f"infinite value in column {name!r}")
    return values


def _first_error(path: Path, bad: np.ndarray, line_of: np.ndarray, values: Sequence[Any],
                 problem: str) -> None:
    """Raise for the first True of `bad`, naming its line and value."""
    if bad.any():
        k = int(np.argmax(bad))
        raise DataFormatError(path, line_of[k], problem, values[k])


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_pair(name: str, pair: tuple[Any, Any]) -> None:
    if len(pair) != 2 or pair[0] == pair[1]:
        raise ValueError(f"{name} must be two distinct labels (negative, positive), got {pair!r}")
