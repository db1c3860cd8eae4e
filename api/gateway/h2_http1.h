// Carrying an HTTP/2 request to a replica that speaks HTTP/1.1, and its answer back (RFC 9113
// §8.2–8.3): pseudo-fields become the request line and Host, split cookie fields are joined,
// connection-specific fields are dropped, field names are lower-cased on the way back.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "api/gateway/h2_message.h"

namespace gpupool::api::gateway {

boost::beast::http::request<boost::beast::http::string_body> ToHttp1(const H2Request& request);
H2Response FromHttp1(const boost::beast::http::response<boost::beast::http::string_body>& answer);

}  // namespace gpupool::api::gateway
