"""harl.nets.cnn and harl.nets.image: HARL's CNN layouts counted by hand, channel order, uint8 scaling."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch.nn import functional as F

from harl.errors import ConfigError
from harl.nets.cnn import CNNBase, PlainCNN
from harl.nets.image import choose_encoder, image_layout, storage_dtype


def layout(shape: tuple[int, ...], dtype: type = np.uint8, order: str = "auto"):  # type: ignore[no-untyped-def]
    return image_layout(spaces.Box(0, 255, shape, dtype), order, "policy", "x.toml")


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


class TestHarlLayout:
    def test_cnn_base_parameters_and_output(self) -> None:
        """HWC (6, 5, 3), hidden [16, 8]: Conv2d(3, 16 // 2 = 8, 3) -> 8 maps of 4 x 3, then Linear(96, 16), Linear(16, 8).

        conv 8*3*3*3 + 8 = 224; Linear(8*4*3 = 96, 16) 96*16 + 16 = 1552; Linear(16, 8) 16*8 + 8 = 136;
        total 224 + 1552 + 136 = 1912 (HARL's CNNLayer: hidden_sizes[0] // 2 maps, (W - 3 + 1) * (H - 3 + 1) each).
        """
        net = CNNBase(layout((6, 5, 3)), [16, 8], "relu")
        assert n_params(net) == 1912
        assert net.out_dim == 8
        assert net(torch.zeros(7, 6, 5, 3, dtype=torch.uint8)).shape == (7, 8)

    def test_plain_cnn_parameters_and_output(self) -> None:
        """PlainCNN width 16 on CHW (3, 6, 5): Conv2d(3, 16 // 4 = 4, 3) 4*27 + 4 = 112, Linear(4*4*3 = 48, 16) 784: 896."""
        net = PlainCNN(layout((3, 6, 5)), 16, torch.nn.ReLU())
        assert n_params(net) == 896
        assert net(torch.zeros(2, 90)).shape == (2, 16)

    def test_cnn_base_is_conv_relu_then_linears_on_pixels_over_255(self) -> None:
        """The output equals the hand-written HARL forward: relu(conv(x / 255)) flattened through relu(Linear)s."""
        torch.manual_seed(0)
        net = CNNBase(layout((5, 4, 3)), [6, 4], "relu")
        pixels = torch.randint(0, 256, (3, 5, 4, 3), dtype=torch.uint8)
        x = pixels.permute(0, 3, 1, 2).float() / 255.0
        h = F.relu(F.conv2d(x, net.conv.weight, net.conv.bias)).flatten(1)
        lin = [m for m in net.linears if isinstance(m, torch.nn.Linear)]
        want = F.relu(lin[1](F.relu(lin[0](h))))
        torch.testing.assert_close(net(pixels), want)

    def test_orthogonal_init_with_the_activation_gain_and_zero_biases(self) -> None:
        """HARL's init_: orthogonal weights (rows orthonormal times gain sqrt(2) for relu), biases 0."""
        net = CNNBase(layout((5, 5, 3)), [8], "relu")
        w = net.conv.weight.reshape(4, -1)
        torch.testing.assert_close(w @ w.T, 2.0 * torch.eye(4), atol=1e-5, rtol=0)
        assert torch.all(net.conv.bias == 0)


class TestLayout:
    def test_auto_channel_order(self) -> None:
        """The end of size 1, 3 or 4 is the channels (the last one when both could be), else the smaller end."""
        assert layout((6, 5, 3)).channels_last and layout((6, 5, 3)).chw == (3, 6, 5)
        assert layout((28, 48, 6)).chw == (6, 28, 48) and layout((6, 28, 48)).chw == (6, 28, 48)
        assert not layout((3, 6, 5)).channels_last and layout((3, 6, 5)).chw == (3, 6, 5)
        assert layout((4, 6, 1)).chw == (1, 4, 6)

    def test_unknown_channel_axis_names_the_key(self) -> None:
        with pytest.raises(ConfigError) as info:
            layout((6, 6, 6))
        assert str(info.value) == (
            "x.toml: policy.channel_order: cannot tell the channel axis of an image of shape (6, 6, 6) "
            '(neither end is 1, 3 or 4, nor the smaller); set policy.channel_order = "last" (HWC) or "first" (CHW)')

    def test_hwc_and_chw_of_one_picture_give_one_output(self) -> None:
        """The same weights on the HWC picture and on its CHW transpose agree."""
        torch.manual_seed(0)
        hwc = CNNBase(layout((6, 5, 3)), [8], "relu")
        chw = CNNBase(layout((3, 6, 5)), [8], "relu")
        chw.load_state_dict(hwc.state_dict())
        pixels = torch.randint(0, 256, (4, 6, 5, 3), dtype=torch.uint8)
        torch.testing.assert_close(hwc(pixels), chw(pixels.permute(0, 3, 1, 2)))

    def test_flat_and_shaped_inputs_agree_and_float_images_are_not_scaled(self) -> None:
        """Buffers hand over flat rows, envs shaped arrays; a float32 image is taken as already scaled."""
        torch.manual_seed(0)
        net = CNNBase(layout((6, 5, 3), np.float32), [8], "relu")
        x = torch.rand(4, 6, 5, 3)
        torch.testing.assert_close(net(x), net(x.reshape(4, -1)))
        assert layout((6, 5, 3), np.float32).scale == 1.0 and layout((6, 5, 3)).scale == 1 / 255

    def test_uint8_images_are_stored_as_uint8(self) -> None:
        assert storage_dtype(spaces.Box(0, 255, (6, 5, 3), np.uint8)) == torch.uint8
        assert storage_dtype(spaces.Box(0, 1, (6, 5, 3), np.float32)) == torch.float32
        assert storage_dtype(spaces.Box(0, 255, (90,), np.uint8)) == torch.float32


class TestEncoderChoice:
    def test_auto_is_cnn_for_images_and_mlp_otherwise(self) -> None:
        image, vector = spaces.Box(0, 255, (6, 5, 3), np.uint8), spaces.Box(-1, 1, (4,), np.float32)
        assert choose_encoder(image, "auto", "policy", "x.toml") == "cnn"
        assert choose_encoder(vector, "auto", "policy", "x.toml") == "mlp"
        assert choose_encoder(image, "mlp", "policy", "x.toml") == "mlp"  # small: allowed

    def test_mlp_on_a_huge_image_is_refused(self) -> None:
        """210 x 160 x 3 = 100,800 inputs: the message names the key and the two fixes."""
        with pytest.raises(ConfigError) as info:
            choose_encoder(spaces.Box(0, 255, (210, 160, 3), np.uint8), "mlp", "critic", "p.toml")
        assert str(info.value) == (
            'p.toml: critic.encoder: "mlp" on an image of shape (210, 160, 3) flattens it to 100,800 inputs '
            '(more than 16,384); set critic.encoder = "cnn" (or "auto"), or shrink the image with a resize wrapper')

    def test_cnn_on_a_vector_is_refused(self) -> None:
        with pytest.raises(ConfigError) as info:
            choose_encoder(spaces.Box(-1, 1, (4,), np.float32), "cnn", "policy", "p.toml")
        assert str(info.value) == ('p.toml: policy.encoder: "cnn" reads 3-D Box images, but the input is (4,); '
                                   'set policy.encoder = "mlp" (or "auto")')
