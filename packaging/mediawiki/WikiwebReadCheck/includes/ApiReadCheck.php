<?php
/**
 * action=wikiwebreadcheck: may a named user read each of the given pages?
 *
 * The answer is MediaWiki's own: PermissionManager::userCan( 'read' ), so
 * core group rights, $wgWhitelistRead, a private wiki and every extension's
 * getUserPermissionsErrors / userCan hooks (Lockdown and the like) count.
 * A redirect is readable only if its target is readable too. A name that is
 * not a registered account is checked as an anonymous reader. Only callers
 * holding the right wikiweb-readcheck may ask. Read-only; nothing cached.
 *
 * Uses only interfaces present from MediaWiki 1.39 to the current release:
 * MediaWikiServices, PermissionManager, TitleFactory, RedirectLookup,
 * UserFactory, ParamValidator.
 *
 * @license MIT
 */

namespace MediaWiki\Extension\WikiwebReadCheck;

use MediaWiki\MediaWikiServices;
use Wikimedia\ParamValidator\ParamValidator;

// ApiBase moved into the MediaWiki\Api namespace in 1.43 (the old name is an alias).
if ( !class_exists( 'MediaWiki\\Extension\\WikiwebReadCheck\\ReadCheckApiBase', false ) ) {
	if ( class_exists( 'MediaWiki\\Api\\ApiBase' ) ) {
		class_alias( 'MediaWiki\\Api\\ApiBase', 'MediaWiki\\Extension\\WikiwebReadCheck\\ReadCheckApiBase' );
	} else {
		class_alias( 'ApiBase', 'MediaWiki\\Extension\\WikiwebReadCheck\\ReadCheckApiBase' );
	}
}

class ApiReadCheck extends ReadCheckApiBase {

	/** How many titles one request may name (MediaWiki's usual multi-value limit). */
	private const TITLES_MAX = 50;

	public function execute() {
		$this->checkUserRightsAny( 'wikiweb-readcheck' );
		$params = $this->extractRequestParams();
		$services = MediaWikiServices::getInstance();
		$userFactory = $services->getUserFactory();
		$titleFactory = $services->getTitleFactory();
		$permissions = $services->getPermissionManager();
		$redirects = $services->getRedirectLookup();

		// No name, an invalid or an unknown one (not an account, an IP
		// address) is an anonymous reader: never more than anonymous
		// readers may read.
		$name = (string)$params['user'];
		$user = $name === '' ? null : $userFactory->newFromName( $name );
		$anonymous = !$user || !$user->isRegistered();
		if ( $anonymous ) {
			$user = $userFactory->newAnonymous();
		}

		$pages = [];
		foreach ( $params['titles'] as $text ) {
			$entry = [ 'title' => $text ];
			$title = $titleFactory->newFromText( $text );
			if ( !$title || $title->isExternal() || !$title->canExist() ) {
				// Nothing that can be read as a page: never readable.
				$entry['invalid'] = true;
				$entry['readable'] = false;
				$pages[] = $entry;
				continue;
			}
			$readable = $permissions->userCan( 'read', $user, $title );
			if ( $readable && $title->exists() ) {
				$target = $redirects->getRedirectTarget( $title );
				if ( $target ) {
					$targetTitle = $titleFactory->castFromLinkTarget( $target );
					$entry['target'] = $targetTitle ? $targetTitle->getPrefixedText() : '';
					// A target elsewhere (interwiki) or beyond a page is not read.
					$readable = $targetTitle && !$targetTitle->isExternal() && $targetTitle->canExist()
						&& $permissions->userCan( 'read', $user, $targetTitle );
				}
			}
			$entry['normalized'] = $title->getPrefixedText();
			$entry['readable'] = $readable;
			$pages[] = $entry;
		}

		$result = $this->getResult();
		$result->addValue( null, $this->getModuleName(), [
			'user' => $anonymous ? '' : $user->getName(),
			'anonymous' => $anonymous,
			'pages' => $pages,
		] );
	}

	public function isReadMode() {
		return true;
	}

	public function getAllowedParams() {
		return [
			'user' => [
				ParamValidator::PARAM_TYPE => 'string',
				ParamValidator::PARAM_DEFAULT => '',
			],
			'titles' => [
				ParamValidator::PARAM_TYPE => 'string',
				ParamValidator::PARAM_REQUIRED => true,
				ParamValidator::PARAM_ISMULTI => true,
				ParamValidator::PARAM_ISMULTI_LIMIT1 => self::TITLES_MAX,
				ParamValidator::PARAM_ISMULTI_LIMIT2 => self::TITLES_MAX,
			],
		];
	}

	protected function getExamplesMessages() {
		return [
			'action=wikiwebreadcheck&user=Alice&titles=Main%20Page|Payroll:Salaries'
				=> 'apihelp-wikiwebreadcheck-example-simple',
		];
	}

	public function getHelpUrls() {
		return 'https://github.com/wikiweb/wikiweb/blob/main/docs/API.md';
	}
}
