#!/usr/bin/env python3
"""tests/safetensors_same.py A B: exit 0 when the two safetensors files hold the same tensors, byte for
byte (their headers' metadata, such as the run id, may differ); prints a line either way."""
import json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: d[v['data_offsets'][0]:v['data_offsets'][1]] for k, v in h.items() if k != '__metadata__'}, h.get('__metadata__', {})
a, ma = load(sys.argv[1]); b, mb = load(sys.argv[2])
diff = [k for k in a if a[k] != b.get(k)] + [k for k in b if k not in a]
print("tensors %d, differing %d %s; step %s/%s loss %s/%s" % (len(a), len(diff), diff[:3], ma.get('step'), mb.get('step'), ma.get('train_loss'), mb.get('train_loss')))
sys.exit(1 if diff else 0)
