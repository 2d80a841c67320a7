"""Building blocks of kernel online gradient descent on noisy inputs (paper P5, Algorithm 1).

* :mod:`.functions` -- the kernels (dot-product and Gaussian) and the losses
  with an analytic derivative, as the coefficient sequences the estimators need.
* :mod:`.estimators` -- the random-order Taylor machinery: query plans,
  ``Map_Estimate``, ``Prod`` and ``Grad_Length_Estimate``.
* :mod:`.support` -- the learned element of the RKHS (its support), bounded in memory.
"""
