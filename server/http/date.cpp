// HTTP dates (RFC 9110, 5.6.7): http_date and parse_http_date from response.hpp.
//
// The calendar arithmetic is done here rather than with gmtime_r/timegm: it is a few integer
// operations, needs no time-zone state, and timegm is not standard C++.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/response.hpp"

namespace spoold::http {

namespace {

constexpr std::array<std::string_view, 7> day_names = {"Sun", "Mon", "Tue", "Wed",
                                                       "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> long_day_names = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
constexpr std::array<std::string_view, 12> month_names = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

constexpr std::int64_t seconds_per_day = 86400;

std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Both conversions count years from March, so that the leap day is the last day of a year and
// the month lengths from March on repeat in a fixed 153-day pattern per five months; a 400-year
// era has exactly 146097 days. Day 0 is 1970-01-01, which is day 719468 counted from 0000-03-01.
struct civil_date {
  std::int64_t year;
  int month;  // 1..12
  int day;    // 1..31
};

civil_date civil_from_days(std::int64_t days) noexcept {
  const std::int64_t shifted = days + 719468;
  const std::int64_t era = floor_div(shifted, 146097);
  const std::int64_t day_of_era = shifted - era * 146097;  // [0, 146096]
  const std::int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const std::int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);  // from March 1
  const std::int64_t month_from_march = (5 * day_of_year + 2) / 153;           // [0, 11]
  const int day = static_cast<int>(day_of_year - (153 * month_from_march + 2) / 5 + 1);
  const int month =
      static_cast<int>(month_from_march < 10 ? month_from_march + 3 : month_from_march - 9);
  return {year_of_era + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

std::int64_t days_from_civil(std::int64_t year, int month, int day) noexcept {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = floor_div(year, 400);
  const std::int64_t year_of_era = year - era * 400;
  const std::int64_t month_from_march = month > 2 ? month - 3 : month + 9;
  const std::int64_t day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

bool is_leap(std::int64_t year) noexcept {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int days_in_month(std::int64_t year, int month) noexcept {
  constexpr int lengths[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : lengths[month - 1];
}

void append_two_digits(std::string& out, int n) {
  out.push_back(static_cast<char>('0' + n / 10));
  out.push_back(static_cast<char>('0' + n % 10));
}

// Reads exactly `count` decimal digits at text[at...]; false if any is not a digit.
bool read_digits(std::string_view text, std::size_t at, std::size_t count, int& value) noexcept {
  if (at + count > text.size()) return false;
  value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + (text[i] - '0');
  }
  return true;
}

template <std::size_t N>
bool find_name(const std::array<std::string_view, N>& names, std::string_view word,
               int& index) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == word) {
      index = static_cast<int>(i);
      return true;
    }
  }
  return false;
}

// "08:49:37"
bool read_time(std::string_view text, std::size_t at, int& hour, int& minute, int& second) {
  return at + 8 <= text.size() && read_digits(text, at, 2, hour) && text[at + 2] == ':' &&
         read_digits(text, at + 3, 2, minute) && text[at + 5] == ':' &&
         read_digits(text, at + 6, 2, second);
}

struct broken_down {
  std::int64_t year = 0;
  int month = 0;  // 1..12
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
};

// "Sun, 06 Nov 1994 08:49:37 GMT"
bool parse_imf_fixdate(std::string_view t, broken_down& d) {
  int unused = 0;
  int year = 0;
  if (t.size() != 29 || !find_name(day_names, t.substr(0, 3), unused) || t.substr(3, 2) != ", " ||
      !read_digits(t, 5, 2, d.day) || t[7] != ' ' ||
      !find_name(month_names, t.substr(8, 3), d.month) || t[11] != ' ' ||
      !read_digits(t, 12, 4, year) || t[16] != ' ' ||
      !read_time(t, 17, d.hour, d.minute, d.second) || t.substr(25) != " GMT") {
    return false;
  }
  d.year = year;
  d.month += 1;
  return true;
}

// "Sunday, 06-Nov-94 08:49:37 GMT" (obsolete RFC 850 form)
bool parse_rfc850(std::string_view t, broken_down& d) {
  const std::size_t comma = t.find(',');
  int unused = 0;
  int year = 0;
  if (comma == std::string_view::npos || !find_name(long_day_names, t.substr(0, comma), unused)) {
    return false;
  }
  const std::string_view rest = t.substr(comma + 1);  // " 06-Nov-94 08:49:37 GMT"
  if (rest.size() != 23 || rest[0] != ' ' || !read_digits(rest, 1, 2, d.day) || rest[3] != '-' ||
      !find_name(month_names, rest.substr(4, 3), d.month) || rest[7] != '-' ||
      !read_digits(rest, 8, 2, year) || rest[10] != ' ' ||
      !read_time(rest, 11, d.hour, d.minute, d.second) || rest.substr(19) != " GMT") {
    return false;
  }
  // Two-digit years: RFC 9110 reads a year more than 50 years ahead as the past century's. A
  // fixed pivot at 70 (the Unix epoch) is what servers of the RFC 850 era meant.
  d.year = year < 70 ? 2000 + year : 1900 + year;
  d.month += 1;
  return true;
}

// "Sun Nov  6 08:49:37 1994" (C asctime form)
bool parse_asctime(std::string_view t, broken_down& d) {
  int unused = 0;
  int year = 0;
  if (t.size() != 24 || !find_name(day_names, t.substr(0, 3), unused) || t[3] != ' ' ||
      !find_name(month_names, t.substr(4, 3), d.month) || t[7] != ' ' || t[10] != ' ' ||
      !read_time(t, 11, d.hour, d.minute, d.second) || t[19] != ' ' ||
      !read_digits(t, 20, 4, year)) {
    return false;
  }
  if (t[8] == ' ') {  // the day is space-padded: " 6"
    if (!read_digits(t, 9, 1, d.day)) return false;
  } else if (!read_digits(t, 8, 2, d.day)) {
    return false;
  }
  d.year = year;
  d.month += 1;
  return true;
}

}  // namespace

std::string http_date(std::int64_t unix_seconds) {
  const std::int64_t days = floor_div(unix_seconds, seconds_per_day);
  const std::int64_t second_of_day = unix_seconds - days * seconds_per_day;
  const civil_date date = civil_from_days(days);
  const std::int64_t weekday = ((days % 7) + 7 + 4) % 7;  // 1970-01-01 was a Thursday (4)

  std::string out;
  out.reserve(29);
  out.append(day_names[static_cast<std::size_t>(weekday)]);
  out.append(", ");
  append_two_digits(out, date.day);
  out.push_back(' ');
  out.append(month_names[static_cast<std::size_t>(date.month - 1)]);
  out.push_back(' ');
  std::string year = std::to_string(date.year);
  if (date.year >= 0 && year.size() < 4) year.insert(0, 4 - year.size(), '0');
  out.append(year);
  out.push_back(' ');
  append_two_digits(out, static_cast<int>(second_of_day / 3600));
  out.push_back(':');
  append_two_digits(out, static_cast<int>(second_of_day / 60 % 60));
  out.push_back(':');
  append_two_digits(out, static_cast<int>(second_of_day % 60));
  out.append(" GMT");
  return out;
}

bool parse_http_date(std::string_view text, std::int64_t& unix_seconds) {
  broken_down d;
  if (!parse_imf_fixdate(text, d) && !parse_rfc850(text, d) && !parse_asctime(text, d)) {
    return false;
  }
  // A leap second (:60) is accepted and counts as the next second, as POSIX time does.
  if (d.day < 1 || d.day > days_in_month(d.year, d.month) || d.hour > 23 || d.minute > 59 ||
      d.second > 60) {
    return false;
  }
  unix_seconds = days_from_civil(d.year, d.month, d.day) * seconds_per_day + d.hour * 3600 +
                 d.minute * 60 + d.second;
  return true;
}

}  // namespace spoold::http
