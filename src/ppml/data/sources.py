"""The dataset registry: which files make up each dataset, where they come from, and their sha256.

Every entry is taken from the PROVENANCE.md files of the verified copies (the CI's ``DATA_MIRROR``): the
original URL, the uncompressed size in bytes and the sha256 of the uncompressed bytes, which the download
stage checks for every file, whether it comes from a mirror or from the URL. Names are paths relative to the
dataset's directory, both under ``data/raw/<dataset>/`` and under a mirror's ``<mirror>/<dataset>/`` (a
mirror may hold ``<name>.xz`` instead). This module does no I/O.

The papers use these datasets as follows: a9a and gisette (ADMM sharing, vertical); Adult (PP-ADMM and
IPP-ADMM, horizontal); Credit 1 = ``default_credit`` and Credit 2 = ``give_credit`` (Paillier quasi-Newton,
vertical with FATE's guest/host split); MADELON and ARCENE, from the same NIPS 2003 challenge as GISETTE and
in the same file format, stand in for it where it cannot be had.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Mapping

_SHA256 = re.compile(r"[0-9a-f]{64}")

# FATE's example data, pinned to the commit the verified copies came from (FATE is Apache-2.0).
_FATE = ("https://raw.githubusercontent.com/FederatedAI/FATE/5a06d9e4c4cd7ab97a5c8357828adbffaca87785"
         "/examples/data")
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
_LIBSVM = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary"


@dataclass(frozen=True)
class SourceFile:
    """One file of a dataset.

    Parameters
    ----------
    name : str
        Relative POSIX path of the file inside the dataset's directory (``a9a.t``,
        ``fate/default_credit_hetero_guest.csv``).
    sha256 : str
        Hex digest of the uncompressed file; the only thing that decides whether a copy is the right one.
    size : int or None
        Uncompressed size in bytes, where the provenance states it.
    url : str or None
        Where the original can be downloaded without logging in; None when there is no such place (the file
        must then come from a mirror).
    """

    name: str
    sha256: str
    size: int | None
    url: str | None

    def __post_init__(self) -> None:
        path = PurePosixPath(self.name)
        if not self.name or path.is_absolute() or ".." in path.parts or str(path) != self.name:
            raise ValueError(f"source file name must be a normalized relative path, got {self.name!r}")
        if self.name == "status.json":
            raise ValueError(f"source file name {self.name!r} collides with the download status file")
        if not _SHA256.fullmatch(self.sha256):
            raise ValueError(f"{self.name}: sha256 must be 64 lowercase hex digits, got {self.sha256!r}")
        if self.size is not None and self.size <= 0:
            raise ValueError(f"{self.name}: size must be a positive number of bytes or None, "
                             f"got {self.size!r}")
        if self.url is not None and not self.url.startswith(("https://", "http://")):
            raise ValueError(f"{self.name}: url must be http(s), got {self.url!r}")


@dataclass(frozen=True)
class Dataset:
    """A dataset: its files and where to read about it.

    Parameters
    ----------
    key : str
        Registry key, also the directory name under ``data/raw`` and under a mirror.
    title : str
        Human-readable name.
    homepage : str
        The dataset's page (for files without a direct URL, where to obtain them by hand).
    files : tuple of SourceFile
        Every file the prepare stage reads, in a fixed order.
    note : str
        Anything a user fetching the files should know.
    """

    key: str
    title: str
    homepage: str
    files: tuple[SourceFile, ...]
    note: str = ""

    def __post_init__(self) -> None:
        names = [f.name for f in self.files]
        if not names:
            raise ValueError(f"dataset {self.key!r} lists no files")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"dataset {self.key!r} lists {duplicates[0]!r} twice")

    def file(self, name: str) -> SourceFile:
        """The file called `name`; a KeyError lists the dataset's files."""
        for f in self.files:
            if f.name == name:
                return f
        names = ", ".join(f.name for f in self.files)
        raise KeyError(f"dataset {self.key!r} has no file {name!r} (files: {names})")


_DATASETS = (
    Dataset(
        key="a9a",
        title="LIBSVM a9a / a9a.t (UCI Adult, 123 binary features)",
        homepage="https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a",
        files=(
            SourceFile("a9a", "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906", 2329875,
                       f"{_LIBSVM}/a9a"),
            SourceFile("a9a.t", "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9", 1164628,
                       f"{_LIBSVM}/a9a.t"),
        ),
        note="a9a.t's digest is that of a 4-way consensus of public copies (no unedited copy was found), so "
             "the LIBSVM original may not match it; its largest feature index is 122, read it with "
             "n_features=123.",
    ),
    Dataset(
        key="gisette",
        title="UCI GISETTE (NIPS 2003 feature selection challenge)",
        homepage="https://archive.ics.uci.edu/dataset/170/gisette",
        files=(
            SourceFile("gisette_train.data",
                       "6d4c5e998afe67937b9e77a3334e03c85e545ebc65a6eb1333ffc14125cfc389",
                       67788724, f"{_UCI}/gisette/GISETTE/gisette_train.data"),
            SourceFile("gisette_train.labels",
                       "42bd681fe51b161f033df773df14a0116e492676555ab14616c1b72edc054075",
                       None, f"{_UCI}/gisette/GISETTE/gisette_train.labels"),
            SourceFile("gisette_valid.data",
                       "5cea897956dd172a006132738254a27a8f61ecc1ceb6f5b20639c281d2942254",
                       None, f"{_UCI}/gisette/GISETTE/gisette_valid.data"),
            # The validation labels were released after the challenge, one directory up.
            SourceFile("gisette_valid.labels",
                       "a6b857a0448023f033c4dda2ef848714b4be2ae45ce598d088fb3efb406e08c5",
                       None, f"{_UCI}/gisette/gisette_valid.labels"),
        ),
        note="Digests are the published UCI checksums (GruAna/PreprocessData.jl); no verified copy is in the "
             "mirror.",
    ),
    Dataset(
        key="adult",
        title="UCI Adult (Census Income)",
        homepage="https://archive.ics.uci.edu/dataset/2/adult",
        files=(
            SourceFile("adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
                       3974305,
                       f"{_UCI}/adult/adult.data"),
            SourceFile("adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
                       2003153,
                       f"{_UCI}/adult/adult.test"),
        ),
    ),
    Dataset(
        key="default_credit",
        title="UCI default of credit card clients (Credit 1), with FATE's vertical split",
        homepage="https://archive.ics.uci.edu/ml/datasets/default+of+credit+card+clients",
        files=(
            # FATE's copy is byte-identical to the Kaggle CSV form of the UCI .xls.
            SourceFile("UCI_Credit_Card.csv",
                       "a0f0ab49d6326671d6cd83be5c88dcf18007025fe9a53ecd699119c871176ca1",
                       2862995, f"{_FATE}/UCI_Credit_Card.csv"),
            SourceFile("fate/default_credit_hetero_guest.csv",
                       "4fd6be40766423cd4fd567f3ed4162f9ec512388a2eab2f265f46247c5ae90b0", 4016372,
                       f"{_FATE}/default_credit_hetero_guest.csv"),
            SourceFile("fate/default_credit_hetero_host.csv",
                       "36880a1b1e6a5b85bcb1e7d8b58cb2b024b45422ec29881c8df562e17c4bc6b7", 2987450,
                       f"{_FATE}/default_credit_hetero_host.csv"),
        ),
    ),
    Dataset(
        key="give_credit",
        title="Kaggle Give Me Some Credit (Credit 2)",
        homepage="https://www.kaggle.com/c/GiveMeSomeCredit/data",
        files=(
            SourceFile("cs-training.csv", "1bd46da486a5708c58c7b01a034fae2a13b327f6f7b62ea7ba4fe3b5824b24ac",
                       7564965, None),
        ),
        note="Kaggle competition data: downloading needs a Kaggle login, so there is no direct URL; "
             "put cs-training.csv into the mirror.",
    ),
    Dataset(
        key="madelon",
        title="UCI MADELON (NIPS 2003 feature selection challenge)",
        homepage="https://archive.ics.uci.edu/dataset/171/madelon",
        files=(
            SourceFile("madelon_train.data",
                       "0b6e37711efdc7ab74250c51e7d6966bffd9f8f2b0e9971e882c3a7a380c2314",
                       4001995, f"{_UCI}/madelon/MADELON/madelon_train.data"),
            SourceFile("madelon_train.labels",
                       "10bffcc3b017467cb810d326b931951adcbde2b4870faf981da2991993b48689",
                       5000, f"{_UCI}/madelon/MADELON/madelon_train.labels"),
            SourceFile("madelon_valid.data",
                       "cb9a46475147de1a58d9f15ef4c318e5b85de344e0f9ab92626fa446aa815dc9",
                       1200599, f"{_UCI}/madelon/MADELON/madelon_valid.data"),
            SourceFile("madelon_valid.labels",
                       "fbac32fa87fac41ab731994a1c824e7b25396069bff6df242c01fe240fcb34dc",
                       1500, f"{_UCI}/madelon/madelon_valid.labels"),
        ),
    ),
    Dataset(
        key="arcene",
        title="UCI ARCENE (NIPS 2003 feature selection challenge)",
        homepage="https://archive.ics.uci.edu/dataset/167/arcene",
        files=(
            SourceFile("arcene_train.data",
                       "0427dc237d8103810e3861e77ba7b16c3d10c8c526ae83bafdc2a660c5c608f0",
                       2715582, f"{_UCI}/arcene/ARCENE/arcene_train.data"),
            SourceFile("arcene_train.labels",
                       "434bb813ff7e69d182eeed347f77bd4981917d6233efedd01b5f6d916c282fbe",
                       256, f"{_UCI}/arcene/ARCENE/arcene_train.labels"),
            SourceFile("arcene_valid.data",
                       "7f8792b3cfb083c3b722e31b37a0c40604506bdece1d2db621e00d862da1c549",
                       2723110, f"{_UCI}/arcene/ARCENE/arcene_valid.data"),
            SourceFile("arcene_valid.labels",
                       "b591228155de082dd39b2e85b12b75a55bd8ca057b7e1c0d7f54683d0a594fc3",
                       256, f"{_UCI}/arcene/arcene_valid.labels"),
        ),
        note="No published checksum exists; the digests are those of four independent identical copies whose "
             "counts and value sums equal the organisers' arcene.param.",
    ),
)

#: Every dataset the pipeline knows, by key (read-only).
DATASETS: Mapping[str, Dataset] = MappingProxyType({d.key: d for d in _DATASETS})


def get_dataset(key: str, registry: Mapping[str, Dataset] | None = None) -> Dataset:
    """The registry entry for `key`; a KeyError lists the known keys.

    Parameters
    ----------
    key : str
        Dataset key (``a9a``, ``adult``, ...).
    registry : mapping, optional
        Where to look; :data:`DATASETS` by default (tests pass their own).
    """
    registry = DATASETS if registry is None else registry
    try:
        return registry[key]
    except KeyError:
        raise KeyError(f"unknown dataset {key!r} (known: {', '.join(sorted(registry))})") from None
