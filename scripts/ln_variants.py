"""Write the robustness table of chapter "LayerNorm" (rcteach/ln_variants.json).

Eight variants of 4 networks of 128 layers (rcteach.wu_table.variant_table), about 20 s of CPU: more
than the chapter's budget, so the chapter reads this file.  tests/test_wu_table.py checks that the
file is what this script writes (settings, and one variant recomputed).

Run: OMP_NUM_THREADS=1 .venv/bin/python scripts/ln_variants.py
"""

import json
from pathlib import Path

from rcteach import wu_table

out = Path(wu_table.__file__).parent / wu_table.VARIANT_FILE
data = {"settings": wu_table.VARIANT_SETTINGS, "layers": list(wu_table.VARIANT_LAYERS),
        "variants": wu_table.variant_table(**wu_table.VARIANT_SETTINGS)}
out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
print(f"wrote {out}")
