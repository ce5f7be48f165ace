"""Unit tests of int4_baselines.py's pure helpers (no torch needed):
`python3 -m unittest bench/torch/test_int4_baselines.py` from the repository root."""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import int4_baselines as b  # noqa: E402


class Helpers(unittest.TestCase):
    def test_stats(self):
        s = b.stats_us([3.0, 1.0, 2.0, 4.0])
        self.assertEqual(s["median_us"], 2.5)
        self.assertEqual(s["p10_us"], 1.0)
        self.assertEqual(s["p90_us"], 4.0)
        self.assertEqual(b.stats_us([5.0])["median_us"], 5.0)
        self.assertTrue(math.isnan(b.stats_us([])["median_us"]))

    def test_rotation_covers_four_l2(self):
        l2 = 50 << 20
        for k, n in b.SHAPES:
            for nbytes in (b.int4_bytes(k, n), b.fp16_bytes(k, n)):
                c = b.copies_for(nbytes, l2)
                self.assertGreaterEqual(c, 2)
                self.assertGreaterEqual(c * nbytes, 4 * l2)
                calls = b.calls_per_replay(c)
                self.assertEqual(calls % c, 0)
                self.assertGreaterEqual(calls, b.MIN_CALLS)

    def test_rotation_cap(self):
        self.assertEqual(b.copies_for(3 << 30, 50 << 20), 2)
        self.assertEqual(b.copies_for(1 << 30, 1 << 40, cap_bytes=4 << 30), 4)

    def test_bytes(self):
        # 5120 -> 4352: 11.1 MB of codes, 40 groups of bf16 (scale, zero) pairs.
        self.assertEqual(b.int4_bytes(5120, 4352), 5120 * 4352 // 2 + 40 * 4352 * 4 + 2 * 5120 + 2 * 4352)
        self.assertEqual(b.fp16_bytes(2, 3), 12 + 4 + 6)
        self.assertAlmostEqual(b.gbps(1e9, 1e6), 1.0)
        self.assertIsNone(b.gbps(1e9, float("nan")))

    def test_pack_pairs_high_nibble_first(self):
        self.assertEqual(b.pack_pairs([1, 2, 15, 0]), [0x12, 0xF0])
        with self.assertRaises(ValueError):
            b.pack_pairs([1, 2, 3])

    def test_tinygemm_round_trip(self):
        col = [0.01 * math.sin(i) for i in range(128)]
        scale, zero, codes = b.tinygemm_qparams(col)
        self.assertTrue(all(0 <= q <= 15 for q in codes))
        err = max(abs(b.dequant(q, scale, zero) - w) for q, w in zip(codes, col))
        self.assertLessEqual(err, scale / 2 + 1e-12)

    def test_markdown_with_errors(self):
        res = {"device": {"name": "H200", "l2_bytes": 60 << 20}, "copy": {"gbps": 4000.0},
               "gemv": [{"k": 5120, "n": 4352, "kind": "fp16", "median_us": 12.3, "p10_us": 12.0,
                         "p90_us": 13.0, "gbps": 3600.0, "pct_copy": 90.0, "copies": 5},
                        {"k": 5120, "n": 4352, "kind": "int4_g128", "error": "RuntimeError: x\ntrace"}],
               "ffn_block_tp4": {"median_us": 100.0, "what": "chain"},
               "fused_down_chain_tp4": {"error": "boom\nmore"}, "errors": ["setup: y"]}
        md = b.markdown(res)
        self.assertIn("| 5120 → 4352 | fp16 | 12.3 (12.0–13.0) | 3600 | 90 |", md)
        self.assertIn("RuntimeError: x |", md)
        self.assertIn("6.40 ms", md)
        self.assertIn("boom", md)
        self.assertNotIn("trace", md)

    def test_no_torch_writes_json(self):
        # Here torch is absent: the run must still write its JSON with the error recorded.
        import json
        import tempfile
        try:
            import torch  # noqa: F401
            self.skipTest("torch is installed")
        except ImportError:
            pass
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            self.assertEqual(b.main(["x", out]), 0)
            with open(out) as f:
                res = json.load(f)
            self.assertTrue(res["errors"][0].startswith("setup: ModuleNotFoundError"))
            self.assertTrue(os.path.exists(os.path.join(d, "t.md")))


if __name__ == "__main__":
    unittest.main()
