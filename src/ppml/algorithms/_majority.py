"""The trivial baseline every error rate is shown beside: predict the training majority class for every row."""

from __future__ import annotations

import numpy as np


def majority_error(y_train: np.ndarray, y_test: np.ndarray) -> float:
    """Test error rate of the classifier that predicts the training labels' majority class (ties: class 0).

    Parameters
    ----------
    y_train, y_test : ndarray of {0, 1}
        Training labels (which class is the majority) and test labels (where its error is measured).
    """
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if y_train.size == 0 or y_test.size == 0:
        raise ValueError(f"majority_error needs labels, got {y_train.size} training and {y_test.size} test labels")
    majority = int(np.mean(y_train) > 0.5)
    return float(np.mean(y_test != majority))
