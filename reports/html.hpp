// Text made safe inside HTML (element content and quoted attribute values).
#pragma once

#include <string>

namespace dtsim::reports {

// &, <, >, " and ' as entities; control characters other than newline as spaces.
std::string html_escape(const std::string& s);

}  // namespace dtsim::reports
