// The AWS shared configuration as the AWS SDKs and CLI read it, for s3:// URLs: the environment
// first, then the profile (AWS_PROFILE, else "default") in the credentials file and the config
// file. docs/remote.md ("S3: configuration and credentials") has the precedence table; every rule
// is tested over temporary files (tests/remote/aws_config_test.cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace sluice::remote {

/// One file of the AWS INI kind: "[section]" headers, "key = value" lines, whole-line comments
/// ('#' or ';'), and nested blocks (a key with no value followed by indented "sub = value" lines,
/// as in "s3 =\n  addressing_style = path") stored as "key.sub". Keys are lower-cased.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;
[[nodiscard]] IniSections parse_aws_ini(std::string_view text);

/// A resolved value and where it came from: a variable's name, "profile NAME in FILE", or
/// "default".
struct AwsSetting {
  std::string value, from;
};

struct AwsSettings {
  std::string profile;    ///< the profile looked up: AWS_PROFILE, else "default"
  AwsSetting region;      ///< never empty: us-east-1 by default
  AwsSetting endpoint;    ///< empty value: AWS's regional endpoint
  AwsSetting addressing;  ///< "auto", "path" or "virtual"
  AwsSetting ca_bundle;   ///< empty value: libcurl's built-in bundle
  std::string key_id, secret, session_token;  ///< empty key_id: unsigned (anonymous) requests
  std::string credentials;                    ///< where the keys came from (never the secret)
};

/// The settings of an s3:// request from the environment and the shared files. A missing file
/// is an empty one. Throws a usage Error for an unreadable file, AWS_PROFILE naming a profile in
/// neither file, a profile whose credentials come from a source Sluice does not run
/// (credential_process, role_arn, SSO, web identity), or an unknown addressing style.
[[nodiscard]] AwsSettings resolve_aws_settings();

}  // namespace sluice::remote
