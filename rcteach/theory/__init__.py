"""Closed-form predictions, one function per formula, in one module per topic.

Every prediction the book plots, the theory checks test and the explorers draw comes from here, as
``rcteach.theory.<name>`` (each module's names are re-exported).  Notation (see the book's
introduction): T tokens, d width, gamma = T/d, logits i.i.d. N(m, s2), c = e^{s2} - 1 the squared
coefficient of variation of e^g.  "Leading order" means the first term of the expansion in 1/T at
fixed s2; finite-T corrections are O(sqrt(c/T)) relative.

The modules follow the mathematics, not the book's parts: a topic serves every chapter that needs it
(the spectra of softmax attention, for one, serve chapters 1-3 and the real models of chapter 12), and
a chapter may draw on several topics.

* :mod:`~rcteach.theory.spectra`: entries, norms, outlier and bulk of softmax attention (chapters 1-3, 12);
* :mod:`~rcteach.theory.width`: the stable rank of one layer's output (chapters 4, 15) and of real models'
  embeddings (chapter 12);
* :mod:`~rcteach.theory.depth`: per-layer factors of mu^2 and of the norm (chapters 5-6);
* :mod:`~rcteach.theory.maps`: ReLU and sigmoid attention (chapter 7);
* :mod:`~rcteach.theory.masks`: consensus rates of masks in closed form (chapter 9);
* :mod:`~rcteach.theory.layernorm`: the zero front of causal attention with dropout (chapter 10), rates
  of normalised layers near consensus (chapters 14, 16).
"""

from __future__ import annotations

from .depth import *  # noqa: F403
from .depth import __all__ as _depth
from .layernorm import *  # noqa: F403
from .layernorm import __all__ as _layernorm
from .maps import *  # noqa: F403
from .maps import __all__ as _maps
from .masks import *  # noqa: F403
from .masks import __all__ as _masks
from .spectra import *  # noqa: F403
from .spectra import __all__ as _spectra
from .width import *  # noqa: F403
from .width import __all__ as _width

__all__ = [*_spectra, *_width, *_depth, *_maps, *_masks, *_layernorm]

