"""Image models of timm and torchvision for the vision sweeps (bench/timm_sweep.py,
bench/torchvision_sweep.py) and test_vision_zoo_models.py: random weights
drawn from a fixed seed, eval mode, and seeded small inputs. Nothing is downloaded.

A model is named "<zoo>/<name>": "timm/resnet10t", "torchvision/resnet18",
"torchvision/fasterrcnn_resnet50_fpn". Importing this module imports neither library."""

# One model per timm family, the smallest variant, called at its default input size
# (pretrained_cfg["input_size"]); the families the issue names come first.
TIMM_NAMES = [
    "resnet10t", "efficientnet_b0", "convnext_atto", "vit_tiny_patch16_224",
    "deit_tiny_patch16_224", "swin_tiny_patch4_window7_224", "beit_base_patch16_224",
    "maxvit_nano_rw_256", "regnetx_002", "mobilenetv3_small_050", "efficientformer_l1",
    "efficientformerv2_s0", "mobilevit_xxs", "levit_128s", "pit_ti_224", "cait_xxs24_224",
    "coat_lite_tiny", "convit_tiny", "crossvit_tiny_240", "densenet121", "dla46_c",
    "dpn48b", "edgenext_xx_small", "efficientvit_b0", "efficientvit_m0", "fastvit_t8",
    "ghostnet_050", "gcvit_xxtiny", "hgnetv2_b0", "hrnet_w18_small", "inception_next_atto",
    "poolformer_s12", "nest_tiny", "nf_regnet_b0", "pvt_v2_b0", "repvit_m0_9",
    "rexnet_100", "resnest14d", "resnetv2_18", "selecsls42b", "legacy_seresnet18",
    "skresnet18", "starnet_s050", "tiny_vit_5m_224", "twins_svt_small", "visformer_tiny",
    "xcit_nano_12_p16_224", "mobileone_s0", "cs3darknet_focus_s", "ese_vovnet19b_dw",
    "swinv2_tiny_window8_256", "eva02_tiny_patch14_224", "mvitv2_tiny", "hiera_tiny_224",
    "focalnet_tiny_srf", "davit_tiny", "mambaout_femto", "botnet26t_256",
    "repghostnet_050", "swiftformer_xs", "fasternet_t0", "shvit_s1", "rdnet_tiny",
    "res2net50_14w_8s", "volo_d1_224", "mixer_b16_224", "vgg11", "sequencer2d_s",
]

# torchvision classification inputs: the smallest each family takes (as in
# bench/torchvision_backend_sweep.py); ViT, Swin and MaxViT need their 224 patch grid.
_CLASSIFICATION_SIZES = {"inception_v3": 75, "googlenet": 64}
# Detection models get one 3x128x128 image and resize it to 128 (not 800) inside;
# SSD's transform resizes to its own fixed size whatever it is given.
DETECTION_SIZE = 128
SEGMENTATION_SIZE = 128
BATCH = 1


# The largest torchvision classifiers (over 10 GFLOPs or 300M weights), swept last.
_TORCHVISION_LARGEST = ("vit_h_14", "vit_l_16", "vit_l_32", "regnet_y_128gf",
                        "regnet_y_32gf", "regnet_y_16gf", "regnet_x_32gf")


def torchvision_names():
    """Every detection, segmentation and classification model of torchvision, the
    largest classifiers last."""
    import torchvision

    models = torchvision.models
    names = [n for module in (models.detection, models.segmentation, models)
             for n in models.list_models(module=module)]
    names.sort(key=lambda n: n in _TORCHVISION_LARGEST)
    return [f"torchvision/{n}" for n in names]


def timm_names():
    return [f"timm/{n}" for n in TIMM_NAMES]


def split(name):
    zoo, _, model = name.partition("/")
    if zoo not in ("timm", "torchvision") or not model:
        raise ValueError(f"unknown vision model {name!r}: expected timm/<name> or "
                         "torchvision/<name>")
    return zoo, model


def kind(name):
    """"classification", "detection" or "segmentation"."""
    zoo, model = split(name)
    if zoo == "timm":
        return "classification"
    import torchvision

    if model in torchvision.models.list_models(module=torchvision.models.detection):
        return "detection"
    if model in torchvision.models.list_models(module=torchvision.models.segmentation):
        return "segmentation"
    return "classification"


def build(name, seed=0):
    """The model `name` with weights drawn from `seed`, in eval mode."""
    import torch

    zoo, model_name = split(name)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        if zoo == "timm":
            import timm

            model = timm.create_model(model_name, pretrained=False)
        else:
            import torchvision

            extra = {}
            k = kind(name)
            if k != "classification":
                extra["weights_backbone"] = None
            if k == "detection" and not model_name.startswith("ssd"):
                extra.update(min_size=DETECTION_SIZE, max_size=DETECTION_SIZE)
            model = torchvision.models.get_model(model_name, weights=None, **extra)
            if model_name.startswith("vit_"):
                # torchvision starts the head at zero: every output would be 0.
                torch.nn.init.normal_(model.heads.head.weight, std=0.02)
            if k == "detection":
                _spread_class_scores(model)
    return model.eval()


def _spread_class_scores(model):
    """Redraws the class-score layers of a detection model wider than torchvision's
    initialisation, whose scores (1/91 after softmax, 0.01 after sigmoid) all fall below
    the score threshold: the outputs would be empty and comparing them would test
    nothing of the post-processing (box decoding, NMS, masks, keypoints). Not so wide
    that softmax scores saturate at 1.0: among equal scores, which boxes NMS and the top-k
    keep depends on the last bit of rounding, and an AVX-512 machine's kernels picked
    other boxes than eager for Faster R-CNN with std 0.03 (its scores now spread over
    0.63..0.96, at least 5e-5 apart)."""
    import torch

    for name, module in model.named_modules():
        if any(k in name for k in ("cls_score", "cls_logits", "classification_head")) and \
                isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            # R-CNN heads take a softmax over 91 classes of large features; the others
            # a sigmoid per class.
            torch.nn.init.normal_(module.weight, std=0.01 if "cls_score" in name else 0.03)


def input_size(name, model=None):
    zoo, model_name = split(name)
    if zoo == "timm":
        return tuple(model.pretrained_cfg["input_size"][1:])
    k = kind(name)
    if k == "detection":
        return (DETECTION_SIZE, DETECTION_SIZE)
    if k == "segmentation":
        return (SEGMENTATION_SIZE, SEGMENTATION_SIZE)
    if model_name.startswith(("vit_", "swin_", "maxvit")):
        return (224, 224)
    size = _CLASSIFICATION_SIZES.get(model_name, 64)
    return (size, size)


def inputs(name, model, seed=0):
    """The positional arguments of one forward call: a seeded batch of images, or for
    detection models a list of one image."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    h, w = input_size(name, model)
    if kind(name) == "detection":
        return ([torch.rand(3, h, w, generator=gen)],)
    return (torch.randn(BATCH, 3, h, w, generator=gen),)
