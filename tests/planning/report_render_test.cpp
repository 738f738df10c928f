// report.html opens offline in a real browser: headless Chromium renders it to a PNG with no
// network (a strict Content-Security-Policy in the page, and Chromium's own network log must show
// no request from the page), the screenshot is not blank, and the gnuplot charts are inline SVG.
// Skipped (exit 77 style GTEST_SKIP) only when Chromium is not installed.
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#ifdef DTSIM_HAVE_PNG
#include <png.h>
#endif

namespace {

using dtsim::testing::slurp;
using dtsim::testing::temp;
using dtsim::testing::sh;

std::string chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"}) {
    if (sh(std::string("command -v ") + c + " > /dev/null 2>&1") == 0) return c;
  }
  return "";
}

TEST(ReportRender, HeadlessChromiumRendersTheReportOfflineWithItsCharts) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (scripts/deps --test installs it)";
  const std::string dir = temp("render-report");
  std::filesystem::remove_all(dir);
  const std::string spec = std::string(DTSIM_SOURCE_DIR) + "/examples/sweeps/gpt3-1.3b-weak-scaling-a100.yaml";
  ASSERT_EQ(sh(std::string(DTSIM_BINARY) + " sweep " + spec + " --report " + dir + " > " + temp("render.log") + " 2>&1"), 0) << slurp(temp("render.log"));
  const std::string page = dir + "/report.html";
  const std::string html = slurp(page);

  // The page forbids every request and names nothing remote.
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  const std::regex remote("(src|href)\\s*=\\s*[\"']?\\s*(https?:)?//", std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, remote)) << "a src or href points to the network";
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // The charts are inline SVG drawn by gnuplot.
  std::size_t svgs = 0;
  for (std::size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_GE(svgs, 4u);  // throughput, efficiency, breakdown, memory
  EXPECT_NE(html.find("Produced by GNUPLOT"), std::string::npos);

  // Render it, logging the network.
  const std::string png = dir + "/render.png", netlog = dir + "/netlog.json", profile = temp("render-profile");
  std::filesystem::remove_all(profile);
  const std::string cmd = browser +
                          " --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking --disable-component-update"
                          " --disable-sync --disable-default-apps --disable-extensions --user-data-dir=" + profile +
                          " --window-size=1280,2400 --screenshot=" + png + " --log-net-log=" + netlog + " file://" + page + " > " +
                          dir + "/chromium.log 2>&1";
  sh(cmd);
  ASSERT_TRUE(std::filesystem::exists(png)) << slurp(dir + "/chromium.log");
  const auto size = std::filesystem::file_size(png);
  EXPECT_GT(size, 30'000u) << "a page of text and charts compresses to more than a blank page";

  // No request from the page: every URL request the page's frame made (its network isolation key
  // is the file:// origin) is for a file: or data: URL. Chromium's own background requests carry
  // other keys and are not the page's.
  const std::string log = slurp(netlog);
  ASSERT_FALSE(log.empty()) << "no network log";
  std::istringstream lines(log);
  std::string line;
  int page_requests = 0;
  const std::regex url("\"url\":\"([^\"]*)\"");
  while (std::getline(lines, line)) {
    if (line.find("\"network_isolation_key\":\"file://") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_search(line, m, url)) continue;
    const std::string u = m[1];
    if (u.rfind("file:", 0) == 0 || u.rfind("data:", 0) == 0) continue;
    ++page_requests;
    ADD_FAILURE() << "the page requested " << u;
  }
  EXPECT_EQ(page_requests, 0);

#ifdef DTSIM_HAVE_PNG
  // Not blank: count pixels that are not the page background.
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  ASSERT_NE(png_image_begin_read_from_file(&img, png.c_str()), 0);
  img.format = PNG_FORMAT_RGB;
  std::vector<unsigned char> px(PNG_IMAGE_SIZE(img));
  ASSERT_NE(png_image_finish_read(&img, nullptr, px.data(), 0, nullptr), 0);
  EXPECT_EQ(img.width, 1280u);
  std::size_t inked = 0;
  std::set<unsigned> colors;
  for (std::size_t i = 0; i + 2 < px.size(); i += 3) {
    if (px[i] < 200 || px[i + 1] < 200 || px[i + 2] < 200) ++inked;
    if (colors.size() < 64) colors.insert(static_cast<unsigned>(px[i]) << 16 | static_cast<unsigned>(px[i + 1]) << 8 | px[i + 2]);
  }
  EXPECT_GT(inked, px.size() / 3 / 100) << "less than 1% of the pixels are drawn";
  EXPECT_GE(colors.size(), 8u) << "the charts' colours are missing";
#endif
}

}  // namespace
