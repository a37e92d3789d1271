"""ResNet-50's last stage and head (torchvision's Bottleneck layout, written here so no library or
weights are needed): three bottlenecks 1024 -> 2048 channels (the first strided, with a projection
shortcut), global average pooling and the 1000-way classifier, on a 14x14 input, batch 32.

    kiln model examples/model/resnet_stage4.py:make --device cuda --dtype fp32
"""

import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        h = self.relu(self.bn1(self.conv1(x)))
        h = self.relu(self.bn2(self.conv2(h)))
        return self.relu(self.bn3(self.conv3(h)) + idt)


class Stage4Head(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.layer4 = nn.Sequential(Bottleneck(1024, 512, 2), Bottleneck(2048, 512), Bottleneck(2048, 512))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.layer4(x)), 1))


def make(batch: int = 32, size: int = 14):
    """The stage's input is stage 3's output: a ReLU of a residual sum (non-negative, about half zeros)."""
    torch.manual_seed(0)
    return Stage4Head(), (torch.randn(batch, 1024, size, size).relu(),)


def make_small():
    """A CPU-sized version (the tests)."""
    return make(batch=2, size=4)
