#include "meshsim/ir/printing.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace meshsim {

const ParamValue* PrintedEquation::find(const std::string& key) const {
  for (const PrintedParam& p : params)
    if (p.key == key) return &p.value;
  return nullptr;
}

void PrintedEquation::hide(const std::string& key) {
  params.erase(std::remove_if(params.begin(), params.end(), [&](const PrintedParam& p) { return p.key == key; }),
               params.end());
}

void PrintedEquation::spell(const std::string& key, std::string text) {
  for (PrintedParam& p : params)
    if (p.key == key) p.text = std::move(text);
}

void PrintedEquation::add(const std::string& key, ParamValue value, std::string text) {
  if (!find(key)) params.push_back(PrintedParam{key, std::move(value), std::move(text)});
}

// Python's repr of a float: the shortest digits that read back as `v`, in
// exponent form below 1e-4 and from 1e16 on.
std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
  const std::string sci(buf, end);  // "9.999999974752427e-07", "2e+00"
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  const bool negative = sci[0] == '-';
  std::string digits;
  for (char c : sci.substr(negative, e - negative))
    if (c != '.') digits += c;
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char tail[8];
    std::snprintf(tail, sizeof tail, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += tail;
  } else if (exp >= 0) {
    const size_t whole = static_cast<size_t>(exp) + 1;
    out = digits.size() <= whole ? digits + std::string(whole - digits.size(), '0') + ".0"
                                 : digits.substr(0, whole) + "." + digits.substr(whole);
  } else {
    out = "0." + std::string(-exp - 1, '0') + digits;
  }
  return (negative ? "-" : "") + out;
}

std::string python_list_str(const IntList& l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + std::to_string(l[i]);
  return s + "]";
}

std::string numpy_tuple_str(const IntList& d, const IntList* numpy) {
  std::string t = "(";
  for (size_t j = 0; j < d.size(); ++j) {
    const std::string n = std::to_string(d[j]);
    t += (j ? ", " : "") + (numpy && j < numpy->size() && (*numpy)[j] ? "np.int64(" + n + ")" : n);
  }
  return t + (d.size() == 1 ? ",)" : ")");
}

}  // namespace meshsim
