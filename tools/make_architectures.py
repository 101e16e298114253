#!/usr/bin/env python3
"""Converts keras.applications architectures (random seeded weights) into .tflite models for
timing the kernels on models nobody tuned them for, with a fixed random input per model.

Usage (tensorflow-cpu 2.21 in the venv; ../shared/tools/make_models.py supplies `convert`):
    VENV/bin/python tools/make_architectures.py OUT_DIR resnet50:f32 efficientnetb0:int8 ...
then
    VENV/bin/python tools/compare_litert.py --dir OUT_DIR --runs 10 --binary B

Writes OUT_DIR/NAME_MODE.tflite and OUT_DIR/reference/NAME_MODE/input_0.npy. The models are data
(tens to hundreds of MB): keep them out of the repository.
"""
import os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "tools"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# keras.applications constructor and input size (height, width, channels) per name.
ARCHITECTURES = {
    "resnet50": ("ResNet50", (224, 224, 3)),
    "efficientnetb0": ("EfficientNetB0", (224, 224, 3)),
    "efficientnetv2b0": ("EfficientNetV2B0", (224, 224, 3)),
    "mobilenetv3large": ("MobileNetV3Large", (224, 224, 3)),
    "densenet121": ("DenseNet121", (224, 224, 3)),
    "nasnetmobile": ("NASNetMobile", (224, 224, 3)),
    "convnexttiny": ("ConvNeXtTiny", (224, 224, 3)),
    "inceptionv3": ("InceptionV3", (299, 299, 3)),
    "xception": ("Xception", (299, 299, 3)),
}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    specs = [s.partition(":")[::2] for s in sys.argv[2:]]
    for name, mode in specs:
        if name not in ARCHITECTURES or mode not in ("f32", "f16w", "int8"):
            sys.exit(f"unknown model `{name}:{mode}`: expected NAME:MODE with NAME in "
                     f"{sorted(ARCHITECTURES)} and MODE f32, f16w or int8")
    import numpy as np
    import tensorflow as tf
    from make_models import convert
    for name, mode in specs:
        ctor, shape = ARCHITECTURES[name]
        tf.keras.utils.set_random_seed(0)
        model = getattr(tf.keras.applications, ctor)(input_shape=shape, weights=None)
        shape = tuple(model.input_shape[1:])
        data = convert(model, mode, shape)
        stem = f"{name}_{mode}"
        tmp = os.path.join(out, stem + ".tflite.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out, stem + ".tflite"))
        ref = os.path.join(out, "reference", stem)
        os.makedirs(ref, exist_ok=True)
        rng = np.random.default_rng(7)
        if mode == "int8":
            x = rng.integers(-128, 128, size=(1,) + shape).astype(np.int8)
        else:
            x = rng.uniform(-1, 1, size=(1,) + shape).astype(np.float32)
        np.save(os.path.join(ref, "input_0.npy"), x)
        print(stem, len(data), flush=True)


if __name__ == "__main__":
    main()
