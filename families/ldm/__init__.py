"""LDM family: self-supervised learning as latent distribution matching, with KalmanSSL."""

from .config import KalmanSSLConfig
from .model import LDM, KalmanSSL, ica_loss, kalman_filter, logdet_entropy

__all__ = ["LDM", "KalmanSSL", "KalmanSSLConfig", "ica_loss", "kalman_filter", "logdet_entropy"]
