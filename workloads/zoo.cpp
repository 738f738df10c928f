// The CNNs of the data-parallel literature, layer by layer as torchvision defines them
// (torchvision/models/alexnet.py, vgg.py, resnet.py). Layer names follow torchvision's module
// names where a module exists, so that counts can be checked against a state_dict.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "sim/expected.hpp"
#include "workloads/model.hpp"

namespace dtsim::workloads {

namespace {

// The shape of the feature map flowing between layers.
struct Shape {
  std::int64_t channels = 0;
  std::int64_t h = 0;
  std::int64_t w = 0;
};

std::int64_t conv_out(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  return (in + 2 * padding - kernel) / stride + 1;  // floor, as PyTorch (ceil_mode=False)
}

// Appends layers to a CnnSpec, tracking the feature-map shape so that every layer gets its input
// and output sizes.
class Builder {
 public:
  Builder(CnnSpec& spec, Shape input) : spec_(spec), shape_(input) {}

  const Shape& shape() const { return shape_; }
  void set_shape(Shape s) { shape_ = s; }

  void conv(const std::string& name, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
            bool bias) {
    CnnLayer l = start(CnnLayer::Kind::conv, name);
    l.out_channels = out;
    l.kernel = kernel;
    l.stride = stride;
    l.padding = padding;
    l.bias = bias;
    finish(l, Shape{out, conv_out(shape_.h, kernel, stride, padding), conv_out(shape_.w, kernel, stride, padding)});
  }

  void pool(const std::string& name, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
    CnnLayer l = start(CnnLayer::Kind::pool, name);
    l.kernel = kernel;
    l.stride = stride;
    l.padding = padding;
    finish(l, Shape{shape_.channels, conv_out(shape_.h, kernel, stride, padding), conv_out(shape_.w, kernel, stride, padding)});
  }

  // nn.AdaptiveAvgPool2d(out): the window is in/out when that divides evenly (always at 224x224).
  void adaptive_avgpool(const std::string& name, std::int64_t out) {
    CnnLayer l = start(CnnLayer::Kind::pool, name);
    l.stride = std::max<std::int64_t>(1, shape_.h / out);
    l.kernel = std::max<std::int64_t>(1, (shape_.h + out - 1) / out);
    l.average = true;
    finish(l, Shape{shape_.channels, out, out});
  }

  void batchnorm(const std::string& name) { same_shape(CnnLayer::Kind::batchnorm, name); }
  void relu(const std::string& name) { same_shape(CnnLayer::Kind::relu, name); }
  void dropout(const std::string& name) { same_shape(CnnLayer::Kind::dropout, name); }
  void add(const std::string& name) { same_shape(CnnLayer::Kind::add, name); }

  // The last `n` layers are on a residual block's projection shortcut.
  void mark_shortcut(std::size_t n) {
    for (std::size_t i = spec_.layers.size() - n; i < spec_.layers.size(); ++i) spec_.layers[i].shortcut = true;
  }

  // torch.flatten(x, 1): no layer, only the view changes.
  void flatten() { shape_ = Shape{shape_.channels * shape_.h * shape_.w, 1, 1}; }

  void fc(const std::string& name, std::int64_t out) {
    DTSIM_ASSERT(shape_.h == 1 && shape_.w == 1, "fc layers follow a flatten");
    CnnLayer l = start(CnnLayer::Kind::fc, name);
    l.out_channels = out;
    l.bias = true;
    finish(l, Shape{out, 1, 1});
  }

 private:
  CnnLayer start(CnnLayer::Kind kind, const std::string& name) const {
    CnnLayer l;
    l.kind = kind;
    l.name = name;
    l.in_channels = shape_.channels;
    l.in_h = shape_.h;
    l.in_w = shape_.w;
    return l;
  }
  void finish(CnnLayer& l, Shape out) {
    DTSIM_ASSERT(out.h >= 1 && out.w >= 1, "the input image is too small for this network");
    l.out_channels = out.channels;
    l.out_h = out.h;
    l.out_w = out.w;
    spec_.layers.push_back(l);
    shape_ = out;
  }
  void same_shape(CnnLayer::Kind kind, const std::string& name) {
    CnnLayer l = start(kind, name);
    finish(l, shape_);
  }

  CnnSpec& spec_;
  Shape shape_;
};

CnnSpec start_spec(const std::string& name, const std::string& source, std::int64_t image, std::int64_t published) {
  DTSIM_ASSERT(image >= 64, "CNN builders need an input of at least 64x64");
  CnnSpec s;
  s.name = name;
  s.source = source;
  s.image = image;
  s.classes = 1000;
  s.published_params = published;
  return s;
}

// Bottleneck (torchvision.models.resnet.Bottleneck, expansion 4): 1x1 reduce, 3x3 (carrying the
// stride: ResNet v1.5), 1x1 expand, each followed by batch norm; a projection shortcut (1x1 conv +
// batch norm) when the shape changes; the residual add, then ReLU.
void bottleneck(Builder& b, const std::string& prefix, std::int64_t planes, std::int64_t stride) {
  const Shape in = b.shape();
  b.conv(prefix + ".conv1", planes, 1, 1, 0, false);
  b.batchnorm(prefix + ".bn1");
  b.relu(prefix + ".relu1");
  b.conv(prefix + ".conv2", planes, 3, stride, 1, false);
  b.batchnorm(prefix + ".bn2");
  b.relu(prefix + ".relu2");
  b.conv(prefix + ".conv3", planes * 4, 1, 1, 0, false);
  b.batchnorm(prefix + ".bn3");
  if (stride != 1 || in.channels != planes * 4) {
    const Shape main = b.shape();
    b.set_shape(in);
    b.conv(prefix + ".downsample.0", planes * 4, 1, stride, 0, false);
    b.batchnorm(prefix + ".downsample.1");
    b.mark_shortcut(2);
    DTSIM_ASSERT(b.shape().h == main.h && b.shape().channels == main.channels, "shortcut shape mismatch");
  }
  b.add(prefix + ".add");
  b.relu(prefix + ".relu3");
}

}  // namespace

CnnSpec make_alexnet(std::int64_t image) {
  CnnSpec s = start_spec("alexnet",
                         "torchvision.models.alexnet (A. Krizhevsky, \"One weird trick for parallelizing convolutional "
                         "neural networks\", 2014: 64-192-384-256-256 convolutions)",
                         image, 61'100'840);
  Builder b(s, Shape{3, image, image});
  b.conv("features.0", 64, 11, 4, 2, true);
  b.relu("features.1");
  b.pool("features.2", 3, 2, 0);  // max
  b.conv("features.3", 192, 5, 1, 2, true);
  b.relu("features.4");
  b.pool("features.5", 3, 2, 0);
  b.conv("features.6", 384, 3, 1, 1, true);
  b.relu("features.7");
  b.conv("features.8", 256, 3, 1, 1, true);
  b.relu("features.9");
  b.conv("features.10", 256, 3, 1, 1, true);
  b.relu("features.11");
  b.pool("features.12", 3, 2, 0);
  b.adaptive_avgpool("avgpool", 6);
  b.flatten();
  b.dropout("classifier.0");
  b.fc("classifier.1", 4096);
  b.relu("classifier.2");
  b.dropout("classifier.3");
  b.fc("classifier.4", 4096);
  b.relu("classifier.5");
  b.fc("classifier.6", 1000);
  return s;
}

CnnSpec make_vgg16(std::int64_t image) {
  CnnSpec s = start_spec("vgg16",
                         "torchvision.models.vgg16 (K. Simonyan and A. Zisserman, \"Very Deep Convolutional Networks "
                         "for Large-Scale Image Recognition\", ICLR 2015, configuration D; no batch norm)",
                         image, 138'357'544);
  Builder b(s, Shape{3, image, image});
  // Configuration D: channels of the 3x3 convolutions, 0 for a 2x2 max pool.
  const std::int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  int index = 0;
  for (std::int64_t c : cfg) {
    if (c == 0) {
      b.pool(fmt::format("features.{}", index++), 2, 2, 0);
    } else {
      b.conv(fmt::format("features.{}", index++), c, 3, 1, 1, true);
      b.relu(fmt::format("features.{}", index++));
    }
  }
  b.adaptive_avgpool("avgpool", 7);
  b.flatten();
  b.fc("classifier.0", 4096);
  b.relu("classifier.1");
  b.dropout("classifier.2");
  b.fc("classifier.3", 4096);
  b.relu("classifier.4");
  b.dropout("classifier.5");
  b.fc("classifier.6", 1000);
  return s;
}

CnnSpec make_resnet50(std::int64_t image) {
  CnnSpec s = start_spec("resnet50",
                         "torchvision.models.resnet50 (K. He et al., \"Deep Residual Learning for Image Recognition\", "
                         "CVPR 2016; v1.5: the stride is on the 3x3 convolution)",
                         image, 25'557'032);
  Builder b(s, Shape{3, image, image});
  b.conv("conv1", 64, 7, 2, 3, false);
  b.batchnorm("bn1");
  b.relu("relu");
  b.pool("maxpool", 3, 2, 1);
  const std::int64_t blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t planes = std::int64_t{64} << stage;
    for (std::int64_t i = 0; i < blocks[stage]; ++i) {
      const std::int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      bottleneck(b, fmt::format("layer{}.{}", stage + 1, i), planes, stride);
    }
  }
  b.adaptive_avgpool("avgpool", 1);
  b.flatten();
  b.fc("fc", 1000);
  return s;
}

}  // namespace dtsim::workloads
